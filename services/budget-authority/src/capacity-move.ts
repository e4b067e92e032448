import type { CompiledModel, CompiledTenant } from '@holdfast/config';
import type { CapacityMoveReply, CapacityMoveRequest } from '@holdfast/events';
import { Err, Ok, RpcError, type Result } from '@holdfast/runtime';
import { randomUUID } from 'node:crypto';
import { closeCapacity, scopesOn, takeOn, tenantShare, upstreamsOf } from './capacity.js';
import type { HandlerContext } from './context.js';
import { RECORD_AT } from './handlers/admit.js';
import { encodeOutboxFields } from './outbox.js';
import { runMove } from './scripts.js';

/**
 * An admitted call going on to a fallback upstream (its first failed it, or the team holds its
 * share of that one's connections): its capacity is taken of the fallback as its admission took
 * it (the same tokens, the tenant's priority share and `tenantShare`), and only then given back
 * to the upstream it was taken of (settled to `fromUsedTokens` where attempts there were read
 * and billed), so the call never goes where it took nothing. `moved: false`: the fallback has no
 * room for it (nothing changed); an unknown tenant, model or upstream has none. A fallback that
 * declares no capacity needs no take.
 *
 * Only a live hold of the tenant, of that model, moves, by at most its worst case, and never onto
 * the upstream it names as `from`: anything else is `invalid_request` and changes nothing (a
 * move of another team's call gave that team's take back and took the fallback for it; one
 * after the call's close took the fallback for a call no close would give back).
 *
 * The hold's record says which upstream it is on now (move.lua, compared and set in the org's
 * slot before the capacity's steps, in the upstreams' slots): a move whose `from` is not where
 * the hold is now is refused, so two moves of one call to different fallbacks cannot both take,
 * and a move asked again (the edge timed out on one the authority made) answers `moved` and
 * does again only what was not done (each step is idempotent: the fallback's record says it
 * is taken, `from`'s is gone once closed, the event is written once). The call's close closes
 * the capacity of the upstream the hold is on, whatever the edge names (close.ts): the one its
 * admission took (admit.lua records it), else its last move's. A close that lands while a move
 * is between its claim and its record closes the upstream the move leaves and gives back the
 * fallback; the move then finds the hold closed, records nothing and gives back what it took
 * (a move recorded after the close would leave the fallback's take for its minute).
 */
export async function moveCapacity(
  ctx: HandlerContext,
  req: CapacityMoveRequest,
): Promise<Result<CapacityMoveReply, RpcError>> {
  const cfg = ctx.config.current;
  const tenant = cfg.tenants.get(req.tenant);
  const model = cfg.models.get(req.model);
  const to = cfg.upstreams.get(req.to);
  if (!tenant || !model || !to || !upstreamsOf(cfg, model).includes(to))
    return Ok({ moved: false });
  // Where the hold lives: the admission's org (a team moved since keeps its calls there).
  const org = req.org ?? tenant.org;
  const refused = req.from === req.to ? sameUpstream(req.to) : await notMovable(ctx, org, req);
  if (refused) return Err(new RpcError({ code: 'invalid_request', message: refused }));
  const hold = ctx.keys.reservation(org, req.reservationId);
  // No `from`: the call holds no upstream's capacity, on none or one that declares none.
  const undeclared = upstreamsOf(cfg, model).filter((u) => !scopesOn(ctx.keys, u, model));
  const stands = undeclared.map((u) => u.id).join(',');
  const claimed = await runMove(ctx.redis, [hold], ['claim', req.from ?? '', req.to, stands]);
  if (claimed[0] !== 'claimed' && claimed[0] !== 'again') {
    return Err(new RpcError({ code: 'invalid_request', message: notHere(req, claimed) }));
  }
  // The upstream the move leaves: `from`, or the undeclared one the hold was on.
  const from = claimed[1] || undefined;
  const where = [from ?? '', req.to];
  if (!(await takeOf(ctx, req, tenant, model))) {
    await runMove(ctx.redis, [hold], ['undo', ...where, '']);
    return Ok({ moved: false });
  }
  const event = moveEvent(ctx, org, { ...req, from });
  const outbox = ctx.keys.outbox(org);
  const recorded = await runMove(ctx.redis, [hold, outbox], ['record', ...where, '', ...event]);
  if (recorded[0] !== 'recorded') {
    // Moved on by another move meanwhile, or closed since the claim (its close gave back the
    // upstream left): what this one took of the fallback goes back, nothing else changes.
    await closeCapacity(ctx, { ...req, upstream: req.to, how: 'release' });
    return Err(new RpcError({ code: 'invalid_request', message: notHere(req, recorded) }));
  }
  if (from) await closeCapacity(ctx, { ...req, upstream: from, ...leftHow(req) });
  return Ok({ moved: true });
}

/**
 * How the take of the upstream left closes. An attempt there that the provider read (it failed
 * inside its stream) was counted by its account: settled to what it used. One it answered with
 * an error (a 429 or 5xx): the request was counted, the tokens not, so the request stays and a
 * client that makes the primary fail cannot send it more than its `requestsPerMinute`. Else
 * nothing reached it: given back.
 */
function leftHow(req: CapacityMoveRequest) {
  const used = req.fromUsedTokens;
  if (used !== undefined) return { how: 'settle', usageTokens: used } as const;
  return { how: req.fromAnswered ? 'answered' : 'release' } as const;
}

/** Why move.lua refused: the hold closed meanwhile, or it is on another upstream than `from`. */
function notHere(req: CapacityMoveRequest, r: string[]): string {
  const id = req.reservationId;
  if (r[0] === 'closed') return `reservation ${id} is ${r[1]} already: a closed call moves nowhere`;
  const on = r[1] ? `upstream ${r[1]}` : 'an upstream that declares no capacity';
  return `reservation ${id} is on ${on} now, not ${req.from ?? 'none'}: nothing moved`;
}

const sameUpstream = (upstream: string) =>
  `the call is on upstream ${upstream} already (from and to name it): nothing moved`;

/** The fallback's take: false when it has no room (a fallback that declares nothing has). */
async function takeOf(
  ctx: HandlerContext,
  req: CapacityMoveRequest,
  tenant: CompiledTenant,
  model: CompiledModel,
): Promise<boolean> {
  const cfg = ctx.config.current;
  const s = scopesOn(ctx.keys, cfg.upstreams.get(req.to)!, model);
  if (!s) return true;
  const share = cfg.raw.capacity.shares[tenant.priority];
  const call = { ...req, model, share, tenantShare: tenantShare(cfg, tenant) };
  return !(await takeOn(ctx, s, call));
}

/**
 * Why the call may not move (undefined: it may): it is no live hold of the tenant in `org`
 * (unknown, another team's or org's, or closed), is a call of another model, or `tokens` pass
 * its worst case (its prompt and granted max_tokens, what the edge asks to move).
 */
async function notMovable(
  ctx: HandlerContext,
  org: string,
  req: CapacityMoveRequest,
): Promise<string | undefined> {
  const key = ctx.keys.reservation(org, req.reservationId);
  const [state, r, ownTenant, ownModel, ownPrompt, max] = await ctx.redis.hmget(
    key,
    'state',
    'r',
    'tenant',
    'model',
    'prompt',
    'max',
  );
  // The record's fixed fields (admit.ts RECORD_AT), or fields of their own in a record written
  // before `r`.
  const fixed = r?.split('\u0001');
  const owner = fixed ? fixed[RECORD_AT.tenant] : ownTenant;
  if (state === null || owner !== req.tenant) {
    return `reservation ${req.reservationId} is no hold of team ${req.tenant}: nothing moved`;
  }
  if (state !== 'held') {
    return `reservation ${req.reservationId} is ${state} already: a closed call moves nowhere`;
  }
  const model = fixed ? fixed[RECORD_AT.model] : ownModel;
  if (model !== req.model) {
    return `reservation ${req.reservationId} is a call of model ${model}, not ${req.model}: nothing moved`;
  }
  const worst = Number(fixed ? fixed[RECORD_AT.prompt] : ownPrompt) + Number(max);
  if (req.tokens > worst) {
    return `tokens ${req.tokens} pass the call's worst case, ${worst} (its prompt and max_tokens): nothing moved`;
  }
  return undefined;
}

/**
 * The move's event (`reservation.moved`, move.lua writes it in the org's outbox once per move):
 * nothing else records which upstream's capacity a call holds after it, and a rebuild replays
 * it (rebuild-capacity.ts). Written after the fallback's take, in another slot (never atomic
 * with it): a Redis lost between the two loses both, a failed write answers the move as a
 * store failure (the edge's move asked again writes it).
 */
function moveEvent(ctx: HandlerContext, org: string, req: CapacityMoveRequest): string[] {
  return encodeOutboxFields({
    type: 'reservation.moved',
    id: randomUUID(),
    time: ctx.clock(),
    tenant: req.tenant,
    org,
    reservationId: req.reservationId,
    model: req.model,
    upstream: req.to,
    fromUpstream: req.from,
    tokens: req.tokens,
    fromUsedTokens: req.from ? req.fromUsedTokens : undefined,
    fromAnswered:
      req.from && req.fromUsedTokens === undefined && req.fromAnswered ? true : undefined,
  });
}
