import type { TenantUsage, UsageReply, UsageRequest } from '@holdfast/events';
import type { CompiledTenant } from '@holdfast/config';
import { Err, Ok, RpcError, type Result } from '@holdfast/runtime';
import type { HandlerContext } from '../context.js';
import { planFor } from '../plan.js';
import { run } from '../scripts.js';
import { parseWindows } from '../windows.js';
import { withStore } from './store-error.js';
import { capacityUsage } from '../capacity.js';

async function tenantUsage(
  ctx: HandlerContext,
  tenant: CompiledTenant,
  now: number | undefined,
): Promise<TenantUsage> {
  const cfg = ctx.config.current;
  const plan = planFor(cfg, tenant, ctx.keys, now, ctx.keys.state(tenant.org, tenant.id));
  const [
    suspended,
    inFlight,
    billedT,
    billedU,
    windows,
    owners = '',
    overN = '0',
    overT = '0',
    overU = '0',
    overAt = '0',
  ] = await run(ctx.redis, 'usage', plan.keys, plan.json());
  const thresholds: Record<string, number[]> = {};
  for (const level of tenant.chain) {
    for (const b of cfg.tenants.get(level)?.budgets ?? []) thresholds[`${level}/${b.id}`] = b.soft;
  }
  return {
    tenant: tenant.id,
    parent: tenant.parent ?? null,
    mode: tenant.mode,
    suspended: suspended === '1',
    suspendedBy: owners.split(';').filter((o): o is 'alerter' | 'admin' => o !== ''),
    overruns: {
      count: Number(overN),
      tokens: Number(overT),
      microUsd: Number(overU),
      lastAt: Number(overAt) > 0 ? new Date(Number(overAt)).toISOString() : null,
    },
    inFlight: Number(inFlight),
    maxInFlight: tenant.maxInFlight ?? null,
    billedTokens: Number(billedT),
    billedMicroUsd: Number(billedU),
    windows: parseWindows(windows ?? ''),
    thresholds,
  };
}

async function redisNow(ctx: HandlerContext): Promise<number> {
  const [seconds, micros] = await ctx.redis.time();
  return Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000);
}

/** Usage of one tenant, or of every configured tenant. */
export async function usage(
  ctx: HandlerContext,
  req: UsageRequest,
): Promise<Result<UsageReply, RpcError>> {
  const cfg = ctx.config.current;
  let tenants: CompiledTenant[];
  if (req.tenant !== undefined) {
    const t = cfg.tenants.get(req.tenant);
    if (!t)
      return Err(
        new RpcError({ code: 'invalid_request', message: `unknown tenant "${req.tenant}"` }),
      );
    tenants = [t];
  } else {
    tenants = [...cfg.tenants.values()];
  }
  // One instant for every tenant, on Redis's clock (the one the scripts slide windows by), so
  // the reply's `time` is exactly the instant its windows are as of (the drift audit sums
  // ClickHouse up to it).
  const result = await withStore(ctx.logger, 'usage', async () => {
    const now = ctx.scriptNow() ?? (await redisNow(ctx));
    return { now, tenants: await Promise.all(tenants.map((t) => tenantUsage(ctx, t, now))) };
  });
  if (!result.ok) return result;
  const capacity =
    req.tenant === undefined
      ? await capacityUsage(ctx).catch((err: unknown) => {
          ctx.logger.warn({ err }, 'capacity not read');
          return [];
        })
      : [];
  return Ok({
    time: new Date(result.value.now).toISOString(),
    tenants: result.value.tenants,
    capacity,
  });
}
