import { randomUUID } from 'node:crypto';
import type {
  CloseReply,
  CloseStatus,
  ReleaseRequest,
  SettleRequest,
  Usage,
} from '@holdfast/events';
import type { z } from 'zod';
import { Err, Ok, RpcError, type Result } from '@holdfast/runtime';
import type { HandlerContext } from '../context.js';
import { planFor } from '../plan.js';
import { run } from '../scripts.js';
import { parseWindows } from '../windows.js';
import { withStore } from './store-error.js';

type CloseOp =
  | { op: 'settle'; usage: Usage; outcome: string }
  | { op: 'release'; reason: string }
  | { op: 'expire' };

/** Runs close.lua for one reservation of a tenant. */
export async function closeReservation(
  ctx: HandlerContext,
  tenantId: string,
  reservationId: string,
  what: CloseOp,
): Promise<Result<CloseReply & { status: CloseStatus | 'expired' | 'not_due' }, RpcError>> {
  const cfg = ctx.config.current;
  const tenant = cfg.tenants.get(tenantId);
  if (!tenant) {
    return Err(new RpcError({ code: 'invalid_request', message: `unknown tenant "${tenantId}"` }));
  }
  const now = ctx.clock();
  const plan = planFor(cfg, tenant, ctx.keys, now, ctx.keys.reservation(tenant.org, reservationId));
  const spec = plan.json({
    resId: reservationId,
    eventId: randomUUID(),
    op: what.op,
    usage:
      what.op === 'settle'
        ? {
            prompt: what.usage.promptTokens,
            completion: what.usage.completionTokens,
            cached: what.usage.cachedPromptTokens,
          }
        : { prompt: 0, completion: 0, cached: 0 },
    outcome: what.op === 'settle' ? what.outcome : '',
    reason: what.op === 'release' ? what.reason : '',
  });
  const result = await withStore(ctx.logger, what.op, () =>
    run(ctx.redis, 'close', plan.keys, spec),
  );
  if (!result.ok) return result;
  const [status = 'unknown', billed = '0', cost = '0', windows = ''] = result.value;
  return Ok({
    status: status as CloseStatus,
    billedTokens: Number(billed),
    costMicroUsd: Number(cost),
    windows: parseWindows(windows),
  });
}

export async function settle(ctx: HandlerContext, req: z.output<typeof SettleRequest>) {
  const r = await closeReservation(ctx, req.tenant, req.reservationId, {
    op: 'settle',
    usage: req.usage,
    outcome: req.outcome,
  });
  if (r.ok) ctx.metrics.closes.inc({ op: 'settle', status: r.value.status });
  return r;
}

export async function release(ctx: HandlerContext, req: ReleaseRequest) {
  const r = await closeReservation(ctx, req.tenant, req.reservationId, {
    op: 'release',
    reason: req.reason,
  });
  if (r.ok) ctx.metrics.closes.inc({ op: 'release', status: r.value.status });
  return r;
}
