import { randomUUID } from 'node:crypto';
import type { ResumeRequest, SuspendRequest, SuspensionReply } from '@holdfast/events';
import { Err, Ok, RpcError, type Result } from '@holdfast/runtime';
import type { HandlerContext } from '../context.js';
import { planFor } from '../script-args.js';
import { run } from '../scripts.js';
import { withStore } from '../store-error.js';

type Op =
  | { op: 'suspend'; req: SuspendRequest & { budget: string | null; graceMs: number } }
  | { op: 'resume'; req: ResumeRequest };

/** Suspends or resumes a tenant; the authority then refuses (or admits) its new calls. */
export async function setSuspension(
  ctx: HandlerContext,
  what: Op,
): Promise<Result<SuspensionReply, RpcError>> {
  const cfg = ctx.config.current;
  const tenant = cfg.tenants.get(what.req.tenant);
  if (!tenant)
    return Err(
      new RpcError({ code: 'invalid_request', message: `unknown tenant "${what.req.tenant}"` }),
    );
  const plan = planFor(
    cfg,
    tenant,
    ctx.keys,
    ctx.scriptNow(),
    ctx.keys.state(tenant.org, tenant.id),
  );
  const spec = plan.json({
    op: what.op,
    by: what.req.by,
    eventId: randomUUID(),
    reason: what.op === 'suspend' ? what.req.reason : '',
    budget: what.op === 'suspend' ? (what.req.budget ?? '') : '',
    graceMs: what.op === 'suspend' ? what.req.graceMs : 0,
  });
  const result = await withStore(ctx.logger, what.op, () =>
    run(ctx.redis, 'suspension', plan.keys, spec),
  );
  if (!result.ok) return result;
  const [changed, suspended, owners = ''] = result.value;
  const suspendedBy = owners.split(';').filter((o): o is 'alerter' | 'admin' => o !== '');
  if (changed === '1')
    ctx.logger.info(
      { tenant: tenant.id, op: what.op, by: what.req.by, suspendedBy },
      `tenant ${what.op}ed`,
    );
  return Ok({
    tenant: tenant.id,
    suspended: suspended === '1',
    changed: changed === '1',
    suspendedBy,
  });
}
