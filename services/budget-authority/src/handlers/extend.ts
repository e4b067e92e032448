import { randomUUID } from 'node:crypto';
import type { ExtendReply, ExtendRequest } from '@holdfast/events';
import { Err, Ok, RpcError, type Result } from '@holdfast/runtime';
import type { HandlerContext } from '../context.js';
import { planFor } from '../plan.js';
import { run } from '../scripts.js';
import { parseWindows } from '../windows.js';
import { withStore } from './store-error.js';

/** Grows a live hold to cover more output, if every window still has room (extend.lua). */
export async function extend(
  ctx: HandlerContext,
  req: ExtendRequest,
): Promise<Result<ExtendReply, RpcError>> {
  const cfg = ctx.config.current;
  const tenant = cfg.tenants.get(req.tenant);
  if (!tenant)
    return Err(
      new RpcError({ code: 'invalid_request', message: `unknown tenant "${req.tenant}"` }),
    );
  const plan = planFor(
    cfg,
    tenant,
    ctx.keys,
    ctx.clock(),
    ctx.keys.reservation(tenant.org, req.reservationId),
  );
  const spec = plan.json({
    resId: req.reservationId,
    outputTokens: req.outputTokens,
    eventId: randomUUID(),
  });
  const result = await withStore(ctx.logger, 'extend', () =>
    run(ctx.redis, 'extend', plan.keys, spec),
  );
  if (!result.ok) return result;
  const [status, heldT, heldU, covered, windows] = result.value;
  ctx.metrics.extensions.inc({ status: status ?? 'unknown' });
  return Ok({
    status: status as ExtendReply['status'],
    heldTokens: Number(heldT),
    heldMicroUsd: Number(heldU),
    coveredOutputTokens: Number(covered),
    windows: parseWindows(windows ?? ''),
  });
}
