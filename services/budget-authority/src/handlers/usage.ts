import {
  thresholdKey,
  type TenantUsage,
  type UsageReply,
  type UsageRequest,
  type WindowState,
} from '@holdfast/events';
import type { CompiledTenant } from '@holdfast/config';
import { Err, Ok, RpcError, type Result } from '@holdfast/runtime';
import type { HandlerContext } from '../context.js';
import { planFor } from '../script-args.js';
import { run } from '../scripts.js';
import { parseWindows } from '../windows.js';
import { withStore } from '../store-error.js';
import { capacityUsage } from '../capacity.js';
import { END_USER_KEEP_MS } from '../script-args.js';

/** End users a usage reply lists at most per tenant (the most recently seen first). */
const END_USERS_LISTED = 100;
/**
 * The same when every tenant is asked for (the alerter's poll, the status page of an admin).
 * End users are made by callers (any `user` value), not by the config: at 100 a tenant, a few
 * tenants full of them made that reply larger than NATS's max_payload (1 MiB), and it could
 * not be sent at all. At 10 a tenant (about 16 KB at most) it grows with the configured
 * tenants only; one tenant's usage still lists 100.
 */
const END_USERS_LISTED_ALL = 10;

/**
 * The tenant's end users with budgets still tracked at `now` (seen within END_USER_KEEP_MS),
 * the most recent first, or just `only` when asked for one; and how many are tracked.
 */
async function trackedEndUsers(
  ctx: HandlerContext,
  tenant: CompiledTenant,
  now: number,
  only: string | undefined,
  limit: number,
): Promise<{ users: [string, number][]; count: number }> {
  if (tenant.endUserBudgets.length === 0) return { users: [], count: 0 };
  const registry = ctx.keys.users(tenant.org, tenant.id);
  const since = now - END_USER_KEEP_MS;
  const [count, listed] = await Promise.all([
    ctx.redis.zcount(registry, since, '+inf'),
    only === undefined
      ? ctx.redis.zrevrangebyscore(registry, '+inf', since, 'WITHSCORES', 'LIMIT', 0, limit)
      : ctx.redis
          .zscore(registry, only)
          .then((score) => (score !== null && Number(score) >= since ? [only, score] : [])),
  ]);
  const users: [string, number][] = [];
  for (let i = 0; i + 1 < listed.length; i += 2) users.push([listed[i]!, Number(listed[i + 1])]);
  return { users, count };
}

async function tenantUsage(
  ctx: HandlerContext,
  tenant: CompiledTenant,
  now: number,
  endUser: string | undefined,
  endUsersListed: number,
): Promise<TenantUsage> {
  const cfg = ctx.config.current;
  const tracked = await trackedEndUsers(ctx, tenant, now, endUser, endUsersListed);
  const keyIds = [...tenant.keyBudgets.keys()];
  const plan = planFor(cfg, tenant, ctx.keys, now, ctx.keys.state(tenant.org, tenant.id), {
    keyIds,
    endUsers: tracked.users.map(([id]) => id),
  });
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
  for (const [id, list] of tenant.keyBudgets) {
    for (const b of list)
      thresholds[thresholdKey({ tenant: tenant.id, budget: b.id, scope: 'key', subject: id })] =
        b.soft;
  }
  for (const b of tenant.endUserBudgets) {
    thresholds[thresholdKey({ tenant: tenant.id, budget: b.id, scope: 'end_user' })] = b.soft;
  }
  const all = parseWindows(windows ?? '');
  const of = (scope: WindowState['scope'], subject?: string) =>
    all.filter((w) => w.scope === scope && (subject === undefined || w.subject === subject));
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
    windows: of(undefined),
    thresholds,
    keys: keyIds.map((id) => ({ id, windows: of('key', id) })),
    endUsers: tracked.users.map(([id, seen]) => ({
      id,
      lastSeen: new Date(seen).toISOString(),
      windows: of('end_user', id),
    })),
    endUserCount: tracked.count,
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
  const listed = req.tenant === undefined ? END_USERS_LISTED_ALL : END_USERS_LISTED;
  // One instant for every tenant, on Redis's clock (the one the scripts slide windows by), so
  // the reply's `time` is exactly the instant its windows are as of (the drift audit sums
  // ClickHouse up to it).
  const result = await withStore(ctx.logger, 'usage', async () => {
    const now = ctx.scriptNow() ?? (await redisNow(ctx));
    return {
      now,
      tenants: await Promise.all(tenants.map((t) => tenantUsage(ctx, t, now, req.endUser, listed))),
    };
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
