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
 * Reads of one tenant's usage at most: a read whose registry of end users changed between its
 * two steps (tenantUsage) is read again, and the last is taken as it is (end users new at
 * every read: its list may miss the newest, its count and windows are of one instant).
 */
const USAGE_READS = 3;

/**
 * The tenant's end users with budgets in `registry` still tracked (seen since `since`), the
 * most recent first, or just `only` when asked for one; and how many are tracked.
 */
async function trackedEndUsers(
  ctx: HandlerContext,
  tenant: CompiledTenant,
  registry: string,
  since: number,
  only: string | undefined,
  limit: number,
): Promise<{ users: [string, number][]; count: number }> {
  if (tenant.endUserBudgets.length === 0) return { users: [], count: 0 };
  // The count first: a change of the registry after it is seen by the usage script's own
  // count (usage.lua), whichever of these reads it lands before.
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
  const keyIds = [...tenant.keyBudgets.keys()];
  const registry = ctx.keys.users(tenant.org, tenant.id);
  const since = now - END_USER_KEEP_MS;
  // The end users are read first (whose windows the script reads), then the rest in one
  // script, which counts them again: a close or an admission between the two that changed
  // them (registered, forgot or added an end user) is read again, so a reply that shows a
  // call closed or held lists its end user.
  let tracked: Awaited<ReturnType<typeof trackedEndUsers>>;
  let reply: string[];
  for (let read = 1; ; read++) {
    tracked = await trackedEndUsers(ctx, tenant, registry, since, endUser, endUsersListed);
    const plan = planFor(cfg, tenant, ctx.keys, now, ctx.keys.state(tenant.org, tenant.id), {
      keyIds,
      endUsers: tracked.users.map(([id]) => id),
    });
    const users =
      tenant.endUserBudgets.length === 0
        ? {}
        : { users: plan.keys.push(registry), since: `${since}` };
    reply = await run(ctx.redis, 'usage', plan.keys, plan.json(users));
    if (reply[10] === `${tracked.count}` || read === USAGE_READS) break;
  }
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
    endUserCount = '0',
  ] = reply;
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
    endUserCount: Number(endUserCount),
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
