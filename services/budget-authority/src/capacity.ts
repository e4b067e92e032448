import type {
  CompiledConfig,
  CompiledModel,
  CompiledTenant,
  UpstreamConfig,
} from '@holdfast/config';
import type {
  CapacityCountReply,
  CapacityRetryReply,
  CapacityRetryRequest,
  CapacityUsage,
} from '@holdfast/events';
import { randomUUID } from 'node:crypto';
import { Err, Ok, RpcError, type Result } from '@holdfast/runtime';
import type { HandlerContext } from './context.js';
import type { Keys } from './keys.js';
import { encodeOutboxFields } from './outbox.js';
import { runCapacity, runRetry } from './scripts.js';

type Limits = NonNullable<UpstreamConfig['capacity']>;

/** The capacity scopes of a call on one upstream: the upstream's, then the model's on it. */
export interface Scopes {
  upstream: string;
  keys: string[];
  /** The scopes by model (null: the upstream's own), for a tenant's windows of them. */
  models: (string | null)[];
  limits: [number, number][];
  counting: 'requested' | 'usage';
}

function limitsOf(c: Limits): [number, number] {
  return [c.tokensPerMinute ?? 0, c.requestsPerMinute ?? 0];
}

/** The scopes of `model` on `upstream`; undefined when neither declares a capacity. */
export function scopesOn(
  keys: Keys,
  upstream: UpstreamConfig,
  model: CompiledModel,
): Scopes | undefined {
  const models: (string | null)[] = [];
  const limits: [number, number][] = [];
  if (upstream.capacity) {
    models.push(null);
    limits.push(limitsOf(upstream.capacity));
  }
  // A model's own limits apply on its first upstream (where the provider set them).
  if (model.capacity && model.upstream === upstream.id) {
    models.push(model.id);
    limits.push(limitsOf(model.capacity));
  }
  if (models.length === 0) return undefined;
  const counting = upstream.capacity?.counting ?? model.capacity?.counting ?? 'requested';
  const scopes = models.map((m) => keys.capacity(upstream.id, m));
  return { upstream: upstream.id, keys: scopes, models, limits, counting };
}

/** A tenant's own windows of the scopes (capacity.lua KEYS[n+2..2n+1]). */
export function tenantKeys(keys: Keys, s: Scopes, tenant: string): string[] {
  return s.models.map((m) => keys.capacityTenant(s.upstream, m, tenant));
}

/** The most of each declared capacity the tenant's calls may take (1: no cap of its own). */
export function tenantShare(cfg: CompiledConfig, tenant: CompiledTenant): number {
  return tenant.capacityShare ?? cfg.raw.capacity.tenantShare;
}

/** The model's upstreams in the order calls go to them. */
export function upstreamsOf(cfg: CompiledConfig, model: CompiledModel): UpstreamConfig[] {
  return [model.upstream, ...model.fallbackUpstreams].flatMap((id) => cfg.upstreams.get(id) ?? []);
}

function spec(
  ctx: HandlerContext,
  s: Pick<Scopes, 'limits' | 'counting'>,
  extra: Record<string, unknown>,
): string {
  const now = ctx.scriptNow();
  return JSON.stringify({
    limits: s.limits,
    counting: s.counting,
    ...(now ? { now } : {}),
    ...extra,
  });
}

/**
 * Every upstream of the model is full: the soonest to have room, and how full it is. A plain
 * object (every admission may meet one), not a BaseError. `who`: `all`, the upstream is full
 * for the tenant's priority; `tenant`, the tenant has taken its `tenantShare` of it (`used`
 * is then the tenant's own).
 */
interface CapacityFull {
  code: 'upstream_capacity';
  /** -1: never (`never` says in which series the call is more than the share allows). */
  retryAfterSeconds: number;
  never?: 'tokens' | 'requests';
  upstream: string;
  used: number;
  limit: number;
  who: 'all' | 'tenant';
}

/** The upstream the call's capacity was taken on (undefined: the model's own declares none). */
export type Taken = Result<string | undefined, CapacityFull>;

/**
 * Reserves a call's worst case against the capacity of the first of the model's upstreams that
 * has room for the tenant's priority (its share of each limit): the model's own upstream, else
 * a fallback. An upstream that declares no capacity always has room. When every upstream is
 * full, the refusal says how long until the soonest one has room.
 */
export async function takeCapacity(ctx: HandlerContext, call: CapacityTake): Promise<Taken> {
  let full: CapacityFull | undefined;
  for (const upstream of upstreamsOf(ctx.config.current, call.model)) {
    const s = scopesOn(ctx.keys, upstream, call.model);
    // An upstream that declares nothing has room; the call goes where it always would.
    if (!s) return Ok(full ? upstream.id : undefined);
    const refused = await takeOn(ctx, s, call);
    if (!refused) return Ok(upstream.id);
    if (!full || waitOf(refused) < waitOf(full)) full = refused;
  }
  return full ? Err(full) : Ok(undefined);
}

/** How long a refusal says to wait (a call that never fits: for ever). */
function waitOf(full: Pick<CapacityFull, 'retryAfterSeconds'>): number {
  return full.retryAfterSeconds < 0 ? Infinity : full.retryAfterSeconds;
}

/** What a call takes of an upstream's capacity, and with which shares. */
interface CapacityTake {
  reservationId: string;
  tenant: string;
  model: CompiledModel;
  tokens: number;
  share: number;
  /** The most of each limit one tenant may take (`capacity.tenantShare`; 1: no cap). */
  tenantShare: number;
}

/** Takes the call's capacity of one upstream's scopes, with its record; why not, when full. */
export async function takeOn(
  ctx: HandlerContext,
  s: Scopes,
  call: CapacityTake,
): Promise<CapacityFull | undefined> {
  const capped = call.tenantShare < 1;
  const r = await runTake(
    ctx,
    s,
    [
      ...s.keys,
      ctx.keys.capacityRecord(s.upstream, call.reservationId),
      ...(capped ? tenantKeys(ctx.keys, s, call.tenant) : []),
    ],
    call,
  );
  return r && { code: 'upstream_capacity', upstream: s.upstream, ...r };
}

/**
 * capacity.lua's take: the scopes' windows, the record, then the tenant's own windows when
 * `tenantShare` caps it. Undefined: taken; else how full, and for how long.
 */
async function runTake(
  ctx: HandlerContext,
  s: Pick<Scopes, 'limits' | 'counting'>,
  keys: string[],
  call: { tokens: number; share: number; tenantShare: number; noRecord?: true },
): Promise<Omit<CapacityFull, 'code' | 'upstream'> | undefined> {
  const r = await runCapacity(
    ctx.redis,
    keys,
    spec(ctx, s, {
      op: 'take',
      ...(call.noRecord ? { noRecord: true } : {}),
      tokens: call.tokens,
      share: call.share,
      ...(call.tenantShare < 1 ? { tenantShare: call.tenantShare } : {}),
    }),
  );
  if (r[0] === 'ok') return undefined;
  return {
    retryAfterSeconds: Number(r[1]),
    used: Number(r[3]),
    limit: Number(r[4]),
    who: r[5] === 'tenant' ? 'tenant' : 'all',
    ...(r[6] === 'tokens' || r[6] === 'requests' ? { never: r[6] } : {}),
  };
}

/**
 * Every scope a call's take on `upstream` may have billed, declared now or not (the upstream's,
 * then the model's on it): capacity.lua closes those its record names. `declared`: their
 * 1-based indexes the current config declares (a record from before `scopes` closes those).
 * Before, a close passed only the current config's scopes, so one removed or moved while the
 * call ran kept the call's take for its minute.
 */
function closingScopes(
  keys: Keys,
  upstream: string,
  model: string | undefined,
  now: Scopes | undefined,
): Scopes & { declared: number[] } {
  const models = model === undefined ? [null] : [null, model];
  const limits = models.map((m): [number, number] => {
    const at = now ? now.models.indexOf(m) : -1;
    return at < 0 ? [0, 0] : now!.limits[at]!;
  });
  return {
    upstream,
    keys: models.map((m) => keys.capacity(upstream, m)),
    models,
    limits,
    counting: now?.counting ?? 'requested',
    declared: models.flatMap((m, i) => (now?.models.includes(m) ? [i + 1] : [])),
  };
}

/**
 * Closes what a reservation took of an upstream's capacity: the scopes its record says it
 * took, whatever the config declares now (nothing where it took none).
 */
export async function closeCapacity(
  ctx: HandlerContext,
  call: {
    reservationId: string;
    /** Whose call: its windows are given back too when the take billed them. */
    tenant: string | undefined;
    upstream: string | undefined;
    model: string | undefined;
    /** answered: the provider answered an attempt with an error (its request counted). */
    how: 'settle' | 'release' | 'answered';
    usageTokens?: number;
    /** answered: how many attempts it answered (each a request its account counted). */
    requests?: number;
  },
): Promise<void> {
  if (!call.upstream) return;
  const cfg = ctx.config.current;
  const upstream = cfg.upstreams.get(call.upstream);
  const model = call.model === undefined ? undefined : cfg.models.get(call.model);
  const now = upstream && model ? scopesOn(ctx.keys, upstream, model) : undefined;
  const s = closingScopes(ctx.keys, call.upstream, call.model, now);
  const keys = [
    ...s.keys,
    ctx.keys.capacityRecord(s.upstream, call.reservationId),
    ...(call.tenant ? tenantKeys(ctx.keys, s, call.tenant) : []),
  ];
  const extra = {
    usage: call.usageTokens ?? 0,
    declared: s.declared,
    ...(call.requests ? { requests: call.requests } : {}),
  };
  await runCapacity(ctx.redis, keys, spec(ctx, s, { op: call.how, ...extra }));
}

/**
 * One request of `tenant` to an upstream's counting endpoint, taken of its `countsPerMinute`
 * as a call takes of its capacity (a 1 s bucket that leaves the minute whatever happens; no
 * close): the tenant's priority up to its share of the limit, the tenant up to its
 * `tenantShare`. Taken when the upstream declares no such limit or the tenant is not
 * configured (the edge asks only for its tenants; nothing to share then).
 */
export async function takeCount(
  ctx: HandlerContext,
  req: { tenant: string; upstream: string },
): Promise<CapacityCountReply> {
  const cfg = ctx.config.current;
  const upstream = cfg.upstreams.get(req.upstream);
  const tenant = cfg.tenants.get(req.tenant);
  const limit = upstream?.countsPerMinute;
  if (!upstream || !tenant || limit === undefined) return { taken: true };
  const share = tenantShare(cfg, tenant);
  const s = { limits: [[0, limit] as [number, number]], counting: 'requested' as const };
  const full = await runTake(
    ctx,
    s,
    [
      ctx.keys.countCapacity(upstream.id),
      // Never closed nor retried: no record (its place in KEYS, unused).
      ctx.keys.capacityRecord(upstream.id, 'count'),
      ...(share < 1 ? [ctx.keys.countCapacity(upstream.id, tenant.id)] : []),
    ],
    {
      tokens: 0,
      share: cfg.raw.capacity.shares[tenant.priority],
      tenantShare: share,
      noRecord: true,
    },
  );
  if (!full) return { taken: true };
  return {
    taken: false,
    // A count never allowed (a share of less than one request a minute): as long as any wait.
    retryAfterSeconds: Math.min(3_600, Math.max(1, waitOf(full))),
    who: full.who,
  };
}

/**
 * One more request of a call's upstream for a retry there after the provider answered an
 * attempt (a 429/5xx, or an error inside its stream): its account counted that request, so the
 * retry is taken of the upstream's `requestsPerMinute` as an admission takes (the tenant's
 * priority up to its share, the tenant up to its `tenantShare`; no tokens: the call's are taken
 * already), in the second of the retry, and never closed (the provider counted the answered
 * attempt whatever becomes of the call). Before, the call's 1 + maxRetries attempts were its
 * one request. Taken when the upstream declares nothing for the model or the names are unknown.
 *
 * Only a live hold of the tenant (in the org named, else the team's org now), of the model
 * named, whose capacity is on that upstream, takes: anything else (settled, released, expired
 * or past its lease, unknown, another team's or model's, on another upstream) is
 * `invalid_request` and takes nothing. Before, any of them took the request for its minute;
 * and with no org in the request, a team moved to another org since its admission had every
 * retry of its calls in flight refused (its hold is in the old org's slot).
 */
export async function takeRetry(
  ctx: HandlerContext,
  req: CapacityRetryRequest,
): Promise<Result<CapacityRetryReply, RpcError>> {
  const cfg = ctx.config.current;
  const upstream = cfg.upstreams.get(req.upstream);
  const model = cfg.models.get(req.model);
  const tenant = cfg.tenants.get(req.tenant);
  const s = upstream && model ? scopesOn(ctx.keys, upstream, model) : undefined;
  if (!s || !tenant) return Ok({ taken: true });
  // Where the hold lives: the admission's org (a team moved since keeps its calls there).
  const hold = ctx.keys.reservation(req.org ?? tenant.org, req.reservationId);
  const now = ctx.scriptNow();
  const live = await runRetry(
    ctx.redis,
    [hold],
    ['count', now === undefined ? '' : String(now), req.tenant, req.model, req.upstream],
  );
  if (live[0] !== 'counted') {
    return Err(new RpcError({ code: 'invalid_request', message: notRetryable(req, live) }));
  }
  const share = tenantShare(cfg, tenant);
  const full = await runTake(
    ctx,
    s,
    [
      ...s.keys,
      // Never closed: no record (its place in KEYS, unused).
      ctx.keys.capacityRecord(s.upstream, 'retry'),
      ...(share < 1 ? tenantKeys(ctx.keys, s, tenant.id) : []),
    ],
    {
      tokens: 0,
      share: cfg.raw.capacity.shares[tenant.priority],
      tenantShare: share,
      noRecord: true,
    },
  );
  // No request left: the hold's count of retries (its close's `retryRequests`) taken back.
  if (full) {
    await runRetry(ctx.redis, [hold], ['undo']);
    return Ok({ taken: false });
  }
  await recordRetry(ctx, hold, { ...req, org: req.org ?? tenant.org });
  return Ok({ taken: true });
}

/**
 * The retry's event (`reservation.retried`, retry.lua writes it in the org's outbox while the
 * hold is live): a rebuild counts the retry's request in its second while the call is still in
 * flight. Before, only the call's close carried its retries (`retryRequests`): a rebuild before
 * it gave them back, and for the minute after it the upstream admitted calls its provider
 * refuses. Written after the take, in another slot (never atomic with it): one not written (a
 * failure, or the hold closed since) is counted by the close's `retryRequests` instead, so a
 * failure here is logged and the retry stays taken.
 */
async function recordRetry(
  ctx: HandlerContext,
  hold: string,
  req: CapacityRetryRequest & { org: string },
): Promise<void> {
  const event = encodeOutboxFields({
    type: 'reservation.retried',
    id: randomUUID(),
    time: ctx.clock(),
    tenant: req.tenant,
    org: req.org,
    reservationId: req.reservationId,
    model: req.model,
    upstream: req.upstream,
  });
  await runRetry(ctx.redis, [hold, ctx.keys.outbox(req.org)], ['record', ...event]).catch(
    (err: unknown) => ctx.logger.warn({ err }, 'reservation.retried not written'),
  );
}

/** Why retry.lua found no live hold to retry (nothing taken). */
function notRetryable(req: { reservationId: string; tenant: string }, r: string[]): string {
  const id = req.reservationId;
  if (r[0] === 'closed') {
    return r[1]
      ? `reservation ${id} is ${r[1]}: a closed call takes no retry`
      : `reservation ${id} is no hold of team ${req.tenant}: no retry taken`;
  }
  return `reservation ${id} is a call of ${r[1] ?? ''} ${r[2] ?? ''}, not the one named: no retry taken`;
}

/**
 * What a provider said of its own limits: a 429 with Retry-After blocks the upstream until
 * then; `x-ratelimit-remaining-tokens` with its reset lowers the usable capacity until the
 * reset, so the gateway stops sending what the provider would refuse.
 */
export async function reportCapacity(
  ctx: HandlerContext,
  report: {
    upstream: string;
    model?: string | undefined;
    retryAfterMs?: number;
    remainingTokens?: number;
    resetMs?: number;
  },
): Promise<boolean> {
  const cfg = ctx.config.current;
  const upstream = cfg.upstreams.get(report.upstream);
  const model = report.model ? cfg.models.get(report.model) : undefined;
  if (!upstream) return false;
  const all = scopesOn(ctx.keys, upstream, model ?? noModel(upstream));
  if (!all) return false;
  // A model that declares its own capacity on the upstream: the provider's word is about that
  // model's limit (OpenAI's limits and headers are per model), so it shrinks or blocks that
  // model's scope only, never the upstream's that every other model shares.
  const own = model ? all.models.indexOf(model.id) : -1;
  const s = own < 0 ? all : { ...all, keys: [all.keys[own]!], limits: [all.limits[own]!] };
  const keys = [...s.keys, ctx.keys.capacityRecord(upstream.id, 'report')];
  await runCapacity(ctx.redis, keys, spec(ctx, s, { op: 'report', ...report }));
  return true;
}

/** A model that declares nothing, for an upstream-wide report. */
function noModel(upstream: UpstreamConfig): CompiledModel {
  return { upstream: upstream.id, capacity: undefined } as unknown as CompiledModel;
}

/** The declared capacities and their use in the last minute, for the status page. */
export async function capacityUsage(ctx: HandlerContext): Promise<CapacityUsage[]> {
  const cfg = ctx.config.current;
  const out: CapacityUsage[] = [];
  for (const upstream of cfg.upstreams.values()) {
    const scopes: { model: string | null; limits: Limits; key: string }[] = [];
    // The upstream's own row: its limits, or (declaring only countsPerMinute) none.
    if (upstream.capacity || upstream.countsPerMinute !== undefined) {
      scopes.push({
        model: null,
        limits: upstream.capacity ?? { counting: 'requested' },
        key: ctx.keys.capacity(upstream.id, null),
      });
    }
    for (const m of cfg.models.values()) {
      if (m.capacity && m.upstream === upstream.id) {
        scopes.push({ model: m.id, limits: m.capacity, key: ctx.keys.capacity(upstream.id, m.id) });
      }
    }
    if (scopes.length === 0) continue;
    // The counting endpoint's window (`countsPerMinute`) is read in the same peek, last.
    const countLimit = upstream.countsPerMinute;
    const counted = countLimit !== undefined;
    const s = {
      limits: [
        ...scopes.map((x) => limitsOf(x.limits)),
        ...(counted ? [[0, countLimit] as [number, number]] : []),
      ],
      counting: 'requested' as const,
    };
    const keys = [
      ...scopes.map((x) => x.key),
      ...(counted ? [ctx.keys.countCapacity(upstream.id)] : []),
      ctx.keys.capacityRecord(upstream.id, 'peek'),
    ];
    const rows = await runCapacity(ctx.redis, keys, spec(ctx, s, { op: 'peek' }));
    const [, countRequests = '0'] = counted ? (rows[scopes.length] ?? '').split(',') : [];
    const counts = counted
      ? { countsPerMinute: countLimit, counts: Number(countRequests) }
      : { countsPerMinute: null, counts: 0 };
    scopes.forEach((scope, i) => {
      const [tokens = '0', requests = '0', blocked = '0'] = (rows[i] ?? '').split(',');
      out.push({
        ...(scope.model === null ? counts : { countsPerMinute: null, counts: 0 }),
        upstream: upstream.id,
        model: scope.model,
        tokensPerMinute: scope.limits.tokensPerMinute ?? null,
        requestsPerMinute: scope.limits.requestsPerMinute ?? null,
        tokens: Number(tokens),
        requests: Number(requests),
        blockedUntil: Number(blocked) > Date.now() ? new Date(Number(blocked)).toISOString() : null,
      });
    });
  }
  return out;
}
