import { randomUUID } from 'node:crypto';
import {
  END_USER_FILTER_K,
  firstOwned,
  isoTime,
  type AdmitReply,
  type AdmitRequest,
  type OwnsReply,
  type OwnsRequest,
  type RefusalCode,
  type WindowState,
} from '@holdfast/events';
import type { z } from 'zod';
import {
  holdInputPrice,
  holdOutputPrice,
  longContextPrices,
  tierPrices,
  toolFeeMicroUsd,
  toolUsePrices,
  toolUsesText,
  type CompiledModel,
  type CompiledTenant,
  type ModelPrices,
} from '@holdfast/config';
import { Err, Ok, RpcError, type Result } from '@holdfast/runtime';
import type { HandlerContext } from '../context.js';
import { refusalMessage, shrinkFacts } from '../messages.js';
import { encodeOutboxFields } from '../outbox.js';
import { planFor } from '../script-args.js';
import { run, runRefuse, withDeclared } from '../scripts.js';
import { parseWindows } from '../windows.js';
import { withStore } from '../store-error.js';
import { closeCapacity, takeCapacity, tenantShare } from '../capacity.js';
import { NotReplicatedError } from '../durable.js';
import { closeReservation } from './close.js';

/** Where the record's fixed text (`r`, fields joined by \u0001) keeps what others read of it. */
export const RECORD_AT = { tenant: 0, model: 4, prompt: 7 } as const;

type Reply = Result<AdmitReply, RpcError>;

function refused(
  code: RefusalCode,
  message: string,
  extra: Partial<Extract<AdmitReply, { admitted: false }>> = {},
): Reply {
  return Ok({
    admitted: false,
    code,
    message,
    retryAfterSeconds: null,
    budget: null,
    level: null,
    neededTokens: 0,
    neededMicroUsd: 0,
    windows: [],
    ...extra,
  });
}

/**
 * admit.lua's `price` (see its header): the hold's input and output prices first (at the
 * audio prices when the call sends or asks for audio and they are dearer), then what settles.
 */
function admitPrices(p: ModelPrices, req: { audioInput: boolean; audioOutput: boolean }) {
  const holdIn = holdInputPrice(p, req.audioInput);
  const holdOut = holdOutputPrice(p, req.audioOutput);
  return [holdIn, holdOut, p.cachedInput, p.input, p.cacheWrite5m, p.cacheWrite1h];
}

/** recordTiers per compiled model: the same text for every call (a config apply compiles anew). */
const tiersText = new WeakMap<object, string>();

/**
 * The record's priced service tiers other than the base (close.lua's `tiers`): per tier
 * `name:` and its settle prices (uncached input, output, cached input, 5-minute and 1-hour
 * cache writes, audio input, audio output), tiers joined by ';'. Empty for a model with none.
 */
export function recordTiers(model: Pick<CompiledModel, 'tierPricePico'>): string {
  const known = tiersText.get(model);
  if (known !== undefined) return known;
  const text = Object.entries(model.tierPricePico)
    .map(([tier, p]) => `${tier}:${settlePrices(p)}`)
    .join(';');
  tiersText.set(model, text);
  return text;
}

/** A tier's settle prices as the record's texts write them (lib.lua `cost`'s order). */
function settlePrices(p: ModelPrices): string {
  return [
    p.input,
    p.output,
    p.cachedInput,
    p.cacheWrite5m,
    p.cacheWrite1h,
    p.audioInput,
    p.audioOutput,
  ].join(',');
}

/** recordLongContext per compiled model, as recordTiers. */
const longText = new WeakMap<object, string>();

/**
 * The record's long-context prices (close.lua's `long`, lib.lua longPrice): per tier that has
 * one (`default` the base) `name>line:` and its settle prices, joined by ';'. Empty for a
 * model with none (its records bill as before long-context prices).
 */
export function recordLongContext(model: Pick<CompiledModel, 'longPricePico'>): string {
  const known = longText.get(model);
  if (known !== undefined) return known;
  const text = Object.entries(model.longPricePico)
    .map(([tier, long]) => `${tier}>${long.above}:${settlePrices(long.prices)}`)
    .join(';');
  longText.set(model, text);
  return text;
}

/** cappedKeys per compiled tenant's map, as recordTiers. */
const cappedText = new WeakMap<object, string>();

/** The keys with a maxEndUsers of their own, ',k1,k2,' (a key id has no comma); '' none. */
function cappedKeys(keyMaxEndUsers: ReadonlyMap<string, number>): string {
  if (keyMaxEndUsers.size === 0) return '';
  const known = cappedText.get(keyMaxEndUsers);
  if (known !== undefined) return known;
  const text = `,${[...keyMaxEndUsers.keys()].join(',')},`;
  cappedText.set(keyMaxEndUsers, text);
  return text;
}

/** The record's `long` field, when the model prices long context (none: no field). */
function longFields(model: Pick<CompiledModel, 'longPricePico'>): string[] {
  const text = recordLongContext(model);
  return text === '' ? [] : [text];
}

/**
 * The tool fees a call is held (its bound on each provider-run tool's uses at the model's
 * `price.toolUses`, micro-USD) and the prices its record keeps for the settlement (admit.lua's
 * ARGV[32], ARGV[33]). A tool the model does not price is `not_priced`: the edge refuses it
 * first (a 400 naming `price.toolUses.<tool>`), so only an edge whose config is ahead gets it.
 */
function toolFees(
  model: CompiledModel,
  bounds: z.output<typeof AdmitRequest>['toolUses'],
): Result<{ heldMicroUsd: number; prices: string }, RpcError> {
  if (!bounds || Object.keys(bounds).length === 0) return Ok({ heldMicroUsd: 0, prices: '' });
  const prices = toolUsePrices(model);
  const unpriced = Object.keys(bounds).find((kind) => !Object.hasOwn(prices, kind));
  if (unpriced) {
    return Err(
      new RpcError({
        code: 'not_priced',
        message: `price.toolUses.${unpriced}: model ${model.id} has no price for ${unpriced} uses`,
      }),
    );
  }
  const heldMicroUsd = toolFeeMicroUsd(prices, bounds);
  return Ok({ heldMicroUsd, prices: heldMicroUsd > 0 ? toolUsesText(prices) : '' });
}

/** Records a refusal decided before any state is read (use case or model not allowed). */
async function recordRefusal(
  ctx: HandlerContext,
  tenant: CompiledTenant,
  req: AdmitRequest,
  code: RefusalCode,
  upstream?: string,
) {
  const fields = encodeOutboxFields({
    type: 'admission.refused',
    id: randomUUID(),
    time: ctx.clock(),
    tenant: tenant.id,
    org: tenant.org,
    reservationId: req.reservationId,
    keyId: req.keyId,
    useCase: req.useCase,
    model: req.model,
    mode: tenant.mode,
    api: req.api,
    code,
    promptTokens: req.promptTokens,
    maxTokens: req.maxTokens,
    neededTokens: 0,
    neededMicroUsd: 0,
    budget: null,
    level: null,
    retryAfterSeconds: -1,
    shadow: false,
    windows: '',
    endUser: req.endUser,
    upstream,
  });
  const now = ctx.scriptNow();
  // The summary kind names a use case and a model only when the config does: a client names
  // them, and one kind per name it makes up would be one event per refusal (and a summary hash
  // refusals.lua reads whole per 32 kinds). '*' is no id, so it is none of them.
  const useCase = tenant.useCases.has(req.useCase) ? req.useCase : '*';
  const model = ctx.config.current.models.has(req.model) ? req.model : '*';
  const kind = [tenant.id, code, '', '', useCase, model, req.keyId ?? '', '0', req.api].join('|');
  const spec = JSON.stringify({
    rate: tenant.refusalEventsPerSecond,
    kind,
    fields,
    ...(now === undefined ? {} : { now }),
  });
  const keys = [
    ctx.keys.outbox(tenant.org),
    ctx.keys.state(tenant.org, tenant.id),
    ctx.keys.refusals(tenant.org),
  ];
  const ran = await withStore(ctx.logger, 'admit', () => runRefuse(ctx.redis, keys, spec));
  // Its summary key and fields: an edge answers the same call again itself (refusals.report).
  return ran.ok ? Ok({ kind, fields: JSON.stringify(fields) }) : ran;
}

/**
 * An admission whose hold reached the master but not the replicas asked for is answered
 * budget_store_unavailable (fail closed: the edge does not call the model), so its hold is
 * given back at once instead of waiting for its lease (or being billed at it by onExpiry).
 */
async function undoUnreplicated(
  ctx: HandlerContext,
  tenant: CompiledTenant,
  req: AdmitRequest,
  cause: unknown,
): Promise<void> {
  if (!(cause instanceof NotReplicatedError)) return;
  const reply = cause.reply;
  if (!Array.isArray(reply) || reply[0] !== 'ok' || reply[6] === '1') return;
  const r = await closeReservation(
    ctx,
    {
      tenant: tenant.id,
      org: tenant.org,
      reservationId: req.reservationId,
      keyId: req.keyId,
      endUser: req.endUser,
    },
    { op: 'release', reason: 'not_forwarded' },
  );
  if (!r.ok)
    ctx.logger.warn({ reservationId: req.reservationId }, 'unreplicated hold not given back');
}

/**
 * Whether the call may continue the stored response it names and read the stored items it
 * names by id (none: it may): only a call of the tenant that owns each (its settle recorded
 * it, close.ts `withOwner`), checked before anything is taken, with one MGET (the keys share
 * the org's slot). Another tenant's response or item and an unknown one get the same answer,
 * `response_not_found` or `item_not_found`, the edge's 400 (OpenAI's for an unknown id):
 * nothing held or taken, no refusal recorded (it is not a budget's, and the edge remembers none
 * of it, so it never stands in the way of the tenant's other calls). A file (FILE_ID) is
 * or sealed content (firstOwned) is checked in the file owners' slot, only when the call names
 * one, and refused only when another team's call got it (`item_not_found`).
 */
async function ownsResponse(
  ctx: HandlerContext,
  tenant: CompiledTenant,
  req: { previousResponseId?: string | undefined; itemIds?: string[] | undefined },
): Promise<Result<true, RpcError>> {
  const { previousResponseId: responseId, itemIds = [] } = req;
  const named = responseId === undefined ? itemIds : [responseId, ...itemIds];
  const ids = named.filter((id) => !firstOwned(id));
  const files = named.filter(firstOwned);
  let id: string | undefined;
  if (ids.length > 0) {
    const keys = ids.map((i) => ctx.keys.responseOwner(tenant.org, i));
    const owners = await withStore(ctx.logger, 'admit', () => ctx.redis.mget(...keys));
    if (!owners.ok) return owners;
    id = ids[owners.value.findIndex((owner) => owner !== tenant.id)];
  }
  if (id === undefined && files.length > 0) {
    // A file or sealed content is refused only when another team's call got it first: one no
    // call is recorded with (the operator's upload; sealed content from before the upgrade or
    // whose settle is not recorded yet) is every team's (firstOwned, docs/security.md).
    const keys = files.map((i) => ctx.keys.fileOwner(i));
    const owners = await withStore(ctx.logger, 'admit', () => ctx.redis.mget(...keys));
    if (!owners.ok) return owners;
    id = files[owners.value.findIndex((owner) => owner !== null && owner !== tenant.id)];
  }
  if (id === undefined) return Ok(true);
  const code = id === responseId ? 'response_not_found' : 'item_not_found';
  const message =
    code === 'response_not_found'
      ? `Previous response with id '${id}' not found.`
      : `Item with id '${id}' not found.`;
  return Err(new RpcError({ code, message }));
}

/**
 * `owns`: whether the tenant owns the response and items a count names (ownsResponse, the
 * check its call's admission makes), read-only: nothing held or taken, no refusal, event or
 * admission metric recorded. A tenant this replica's config does not know (after a config
 * catch-up, as admit's) owns nothing: `invalid_request`.
 */
export async function owns(
  ctx: HandlerContext,
  req: z.output<typeof OwnsRequest>,
): Promise<Result<OwnsReply, RpcError>> {
  let tenant = ctx.config.current.tenants.get(req.tenant);
  if (!tenant) {
    await ctx.config.refresh().catch(() => undefined);
    tenant = ctx.config.current.tenants.get(req.tenant);
  }
  if (!tenant) {
    const message = `unknown tenant ${req.tenant}`;
    return Err(new RpcError({ code: 'invalid_request', message }));
  }
  const owned = await ownsResponse(ctx, tenant, req);
  return owned.ok ? Ok({ owned: true }) : owned;
}

/**
 * Admission: checks the register (tenant, use case, model) and the stored response and items
 * the call reads, if any (ownsResponse), then runs admit.lua, which checks
 * every window of the tenant and its ancestors and records the hold in one atomic step.
 */
export async function admit(
  ctx: HandlerContext,
  req: z.output<typeof AdmitRequest>,
): Promise<Reply> {
  if (req.configVersion !== undefined && req.configVersion > ctx.config.version) {
    // The edge serves a newer config than this replica (see AdmitRequest.configVersion). A
    // failed load decides on the config this replica has, as before.
    await ctx.config.atLeast(req.configVersion).catch(() => undefined);
  }
  const cfg = ctx.config.current;
  const tenant = cfg.tenants.get(req.tenant);
  if (!tenant) {
    ctx.metrics.admissions.inc({ outcome: 'refused', code: 'unknown_tenant' });
    return refused(
      'unknown_tenant',
      refusalMessage({
        code: 'unknown_tenant',
        tenant: req.tenant,
        neededTokens: 0,
        neededMicroUsd: 0,
        inFlight: 0,
      }),
    );
  }
  const useCase = tenant.useCases.get(req.useCase);
  const model = cfg.models.get(req.model);
  const code: RefusalCode | undefined = !useCase
    ? 'use_case_not_registered'
    : !model || !useCase.models.includes(req.model)
      ? 'model_not_allowed'
      : undefined;
  if (code || !useCase || !model) {
    const c = code ?? 'model_not_allowed';
    const message = refusalMessage({
      code: c,
      tenant: tenant.id,
      useCase: req.useCase,
      model: req.model,
      neededTokens: 0,
      neededMicroUsd: 0,
      inFlight: 0,
    });
    const recorded = await recordRefusal(ctx, tenant, req, c);
    if (!recorded.ok) return recorded;
    ctx.metrics.admissions.inc({ outcome: 'refused', code: c });
    return refused(c, message, { summary: recorded.value });
  }
  const owned = await ownsResponse(ctx, tenant, req);
  if (!owned.ok) {
    ctx.metrics.admissions.inc({ outcome: 'refused', code: owned.error.code });
    return owned;
  }

  // The hold at the prices of the tier the call is held at; the record keeps the base prices
  // and the other tiers', so settlement bills the tier the provider reports. Checked before
  // anything is taken: an edge whose config prices a tier this one does not gets nothing.
  const tier = tierPrices(model, req.serviceTier);
  if (!tier) {
    return Err(
      new RpcError({
        code: 'not_priced',
        message: `model ${model.id} has no price for service tier ${req.serviceTier} (price.serviceTiers)`,
      }),
    );
  }
  const fees = toolFees(model, req.toolUses);
  if (!fees.ok) return fees;
  // Above the tier's long-context line (on the admitted count: exact or an upper bound) the
  // whole call is held at its long-context prices; the one place a hold's price is chosen.
  const long = longContextPrices(model, req.serviceTier, req.promptTokens);
  const held = long ?? tier;
  const plan = planFor(
    cfg,
    tenant,
    ctx.keys,
    ctx.scriptNow(),
    ctx.keys.reservation(tenant.org, req.reservationId),
    { keyId: req.keyId, endUser: req.endUser },
  );
  // The authority enforces the ceilings too; the edge has already clamped to them.
  const max = Math.min(req.maxTokens, useCase.maxTokens, model.maxOutputTokens);
  // The upstream's capacity first (another slot than the org's, so a step of its own): a
  // call that cannot get through to any upstream is not given a hold. Released below when the
  // budget refuses.
  // An uncounted admit is only evaluated (below): it takes nothing.
  const capacity = req.uncounted
    ? Ok(Ok(undefined))
    : await withStore(ctx.logger, 'admit', () =>
        takeCapacity(ctx, {
          reservationId: req.reservationId,
          tenant: tenant.id,
          model,
          tokens: req.promptTokens + max,
          share: cfg.raw.capacity.shares[tenant.priority],
          tenantShare: tenantShare(cfg, tenant),
        }),
      );
  if (!capacity.ok) return capacity;
  const taken = capacity.value;
  if (!taken.ok) {
    const full = taken.error;
    const recorded = await recordRefusal(ctx, tenant, req, 'upstream_capacity', full.upstream);
    if (!recorded.ok) return recorded;
    ctx.metrics.admissions.inc({ outcome: 'refused', code: 'upstream_capacity' });
    const n = (x: number) => x.toLocaleString('en-US');
    const pct = (x: number) => `${Math.round(x * 100)}%`;
    const { shares } = cfg.raw.capacity;
    if (full.never) {
      // More than the share allows in a whole minute: no wait helps (no Retry-After).
      const share = full.who === 'tenant' ? tenantShare(cfg, tenant) : shares[tenant.priority];
      const whose =
        full.who === 'tenant'
          ? `team ${tenant.id} may use (${pct(share)}: ${tenant.capacityShare === undefined ? 'capacity.tenantShare' : 'its capacityShare'})`
          : `a ${tenant.priority}-priority call may use (${pct(share)})`;
      const what =
        full.never === 'tokens'
          ? `This call could take ${n(req.promptTokens + max)} tokens of upstream ${full.upstream}'s minute, more than the ${n(Math.floor(full.limit * share))} of its ${n(full.limit)} tokens a minute ${whose}`
          : `Upstream ${full.upstream}'s requests a minute allow no request ${whose}`;
      const message = `${what}, so it can never be sent there. Lower max_tokens or shorten the prompt, or ask for a larger share. This is the provider's limit, not your budget.`;
      return refused('upstream_capacity', message);
    }
    const message =
      full.who === 'tenant'
        ? `Team ${tenant.id} has taken its share of upstream ${full.upstream}'s capacity (${n(full.used)} of the ${n(full.limit)} tokens a minute it allows, ${pct(tenantShare(cfg, tenant))} for this team: ${tenant.capacityShare === undefined ? 'capacity.tenantShare' : 'its capacityShare'}), so other teams keep theirs. This is the provider's limit, not your budget: retry in ${full.retryAfterSeconds} s.`
        : `Upstream ${full.upstream} is at the capacity a ${tenant.priority}-priority call may use (${n(full.used)} of ${n(full.limit)} tokens in the last minute, ${pct(shares[tenant.priority])} for ${tenant.priority} priority). This is the provider's limit, not your budget: retry in ${full.retryAfterSeconds} s.`;
    return refused('upstream_capacity', message, { retryAfterSeconds: full.retryAfterSeconds });
  }
  const upstream = taken.value;
  const minOut = Math.min(req.minOutputTokens ?? tenant.shrinkToFit?.minOutputTokens ?? 0, max);
  const now = ctx.scriptNow();
  const prices = model.pricePico;
  const price = admitPrices(held, req).map(String);
  const leaseMs = String(req.leaseMs ?? tenant.leaseMs);
  const keyId = req.keyId ?? '';
  const endUser = req.endUser ?? '';
  const eventId = randomUUID();
  const tracksUser = req.endUser !== undefined && tenant.endUserBudgets.length > 0;
  const keyMaxEndUsers = tracksUser && req.keyId ? tenant.keyMaxEndUsers.get(req.keyId) : undefined;
  // The record's fixed text: lib.lua's RECORD_FIXED, in its order (RECORD_AT names a few).
  const record = [
    tenant.id,
    tenant.org,
    keyId,
    req.useCase,
    req.model,
    tenant.mode,
    req.api,
    String(req.promptTokens),
    price[0],
    // What the output settles at (the hold's may be the audio or another tier's price), then
    // the rest: the base tier's (close.lua finds the others' in the tiers below).
    String(prices.output),
    String(prices.cachedInput),
    String(prices.input),
    String(prices.cacheWrite5m),
    String(prices.cacheWrite1h),
    leaseMs,
    plan.recordLevels,
    plan.recordHolds,
    tenant.mode === 'adaptive' ? String(tenant.adaptive.samples) : '0',
    tenant.onExpiry === 'bill' ? '1' : '0',
    endUser,
    String(prices.audioInput),
    String(prices.audioOutput),
    // The hold's output price, which extend grows the hold with.
    price[1],
    // The tier billed when the settle reports none, and the tiers priced beside the base.
    req.serviceTier,
    recordTiers(model),
    // The long-context prices by tier (close.lua bills the billed tier's above its line),
    // only when the model has any: a record of a model without stays as it was (25 fields).
    ...longFields(model),
  ].join('\u0001');
  // The reservation.created event's fields that the script does not decide.
  const created = [
    ...['type', 'reservation.created', 'id', eventId, 'tenant', tenant.id, 'org', tenant.org],
    ...['reservationId', req.reservationId, 'keyId', keyId, 'useCase', req.useCase],
    ...['model', req.model, 'mode', tenant.mode],
    // `api` at its default (chat) left out: every reader fills it.
    ...(req.api === 'chat' ? [] : ['api', req.api]),
    ...['promptTokens', String(req.promptTokens), 'requestedMaxTokens', String(max)],
    // `serviceTier` always: no schema default fills it (absent is what events from before tiers
    // say), and readers of the stream see the tier billed.
    ...['serviceTier', req.serviceTier, 'onExpiry', tenant.onExpiry],
    ...(long ? ['longContext', '1'] : []),
    ...(endUser ? ['endUser', endUser] : []),
    // The most its provider-run tools may bill: a rebuild holds a post or estimate call so
    // much more when its tenant switched to holding (admit.lua's adopt).
    ...(fees.value.heldMicroUsd > 0
      ? ['toolFeeBoundMicroUsd', String(fees.value.heldMicroUsd)]
      : []),
    // The fees its settle bills uses at (the record's `tf`): a rebuild writes them back.
    ...(fees.value.prices ? ['toolPrices', fees.value.prices] : []),
    // The upstream whose capacity the call took: on the event.
    ...(upstream ? ['upstream', upstream] : []),
  ].join('\u0000');
  // admit.lua's ARGV, in its order (see its header); the plan's follow (run). What only
  // adaptive mode or a new or adopted end user reads travels in one text each (ARGV[25],
  // ARGV[26]): each argument costs Redis a string and a slot whether the script reads it or
  // not, and a field matched out of a text about as much again (docs/benchmarks.md).
  // Only in adaptive mode: another mode's admit names no samples list (a key costs Redis a
  // string and a slot as an argument does, ~1,200 instructions an admit: docs/benchmarks.md).
  const adaptive =
    tenant.mode === 'adaptive'
      ? [
          // Where recent output sizes of this use case and model are kept.
          String(plan.keys.push(ctx.keys.samples(tenant.org, tenant.id, req.useCase, req.model))),
          String(tenant.adaptive.percentile),
          String(tenant.adaptive.minSamples),
          String(tenant.adaptive.samples),
        ]
      : [];
  const spec = [
    now === undefined ? '' : String(now),
    req.reservationId,
    keyId,
    tenant.mode,
    String(req.promptTokens),
    String(max),
    String(minOut),
    leaseMs,
    // The hold's input and output prices (the other four are the record's, in its text).
    price[0]!,
    price[1]!,
    req.extensible ? '1' : '0',
    endUser,
    // Where the tenant's end users with budgets are tracked (0: this call has none), then
    // their filter (admit.lua trackedFilter): declared, as every key a script touches is.
    String(tracksUser ? trackedUsers(plan.keys, ctx, tenant) : 0),
    record,
    created,
    String(fees.value.heldMicroUsd),
    fees.value.prices,
    // Dry, else '0' and the upstream whose capacity the call took (none: ''): the record's
    // `up` (move.lua). One argument: each costs Redis ~650 instructions (docs/benchmarks.md).
    req.uncounted ? '1' : `0${upstream ?? ''}`,
    // The end users the call's key named, where the key has a maxEndUsers (0: none).
    String(
      keyMaxEndUsers !== undefined && req.keyId
        ? plan.keys.push(ctx.keys.keyUsers(tenant.org, tenant.id, req.keyId))
        : 0,
    ),
    // What only a refusal reports.
    req.useCase,
    req.model,
    req.api,
    // A shadow refusal's event id (a refusal that refuses takes the created event's, which it
    // replaces: admit.lua reads it from `created`, not sent twice).
    randomUUID(),
    String(tenant.refusalEventsPerSecond),
    adaptive.join('\u0001'),
    [
      String(tenant.maxEndUsers),
      String(keyMaxEndUsers ?? 0),
      // '1': an end_user_limit refusal carries the end users tracked (AdmitRequest.rememberEndUserCap).
      req.rememberEndUserCap ? '1' : '0',
      // The tenant's keys with a maxEndUsers (',k1,k2,'): an end user whose call in flight is
      // adopted into end-user budgets counts in its key's registry at once (adoptOwn).
      tracksUser ? cappedKeys(tenant.keyMaxEndUsers) : '',
    ].join('\u0001'),
  ];
  // The first admission after a change of the plan walks the calls in flight (admit.lua
  // adoptionKeys): their records and windows, which the plan does not name, are asked for.
  const result = await withDeclared(
    (extra) =>
      withStore(ctx.logger, 'admit', () =>
        run(ctx.redis, 'admit', extra.length ? [...plan.keys, ...extra] : plan.keys, spec, plan),
      ),
    { askings: ADOPT_ASKINGS, lastAsking: 'return' },
  );
  const release = () =>
    closeCapacity(ctx, {
      reservationId: req.reservationId,
      tenant: tenant.id,
      upstream,
      model: req.model,
      how: 'release',
    }).catch((err: unknown) => ctx.logger.warn({ err }, 'capacity not given back'));
  if (!result.ok) {
    await release();
    await undoUnreplicated(ctx, tenant, req, result.error.cause);
    return result;
  }
  const r = result.value;
  if (r[0] !== 'ok') await release();
  if (r[0] === 'keys') return adoptionMovedOn(ctx, tenant, req);
  if (r[0] === 'fits') {
    // Uncounted, and it would fit even with the least prompt: never admitted so.
    return Err(
      new RpcError({
        code: 'not_counted',
        message: `${tenant.id} may make this call if its prompt fits: count the prompt and ask again`,
      }),
    );
  }
  if (r[0] === 'ok') {
    ctx.metrics.admissions.inc({ outcome: 'admitted', code: '' });
    return Ok({
      admitted: true,
      reservationId: req.reservationId,
      org: tenant.org,
      ...(upstream ? { upstream } : {}),
      mode: tenant.mode,
      heldTokens: Number(r[1]),
      heldMicroUsd: Number(r[2]),
      maxTokens: Number(r[3]),
      shrunk: r[4] === '1',
      expiresAt: isoTime(Number(r[5])),
      duplicate: r[6] === '1',
      coveredOutputTokens: Number(r[8]),
      windows: parseWindows(r[7] ?? ''),
    });
  }
  const refusal = r[1] as RefusalCode;
  const windows = parseWindows(r[6] ?? '');
  // The script reports every budget's window, in the plan's order.
  const window: WindowState | undefined = windows[Number(r[2]) - 1];
  const retry = Number(r[3]);
  // end_user_limit: the scope, then its summary and the end users tracked (admit.lua refuse).
  const [summaryKind, summaryFields] = refusal === 'end_user_limit' ? [r[9], r[10]] : [r[8], r[9]];
  const tracked = refusal === 'end_user_limit' && r[11] ? r[11] : undefined;
  ctx.metrics.admissions.inc({ outcome: 'refused', code: refusal });
  return refused(
    refusal,
    refusalMessage({
      code: refusal,
      tenant: tenant.id,
      window,
      neededTokens: Number(r[4]),
      neededMicroUsd: Number(r[5]),
      inFlight: Number(r[7]),
      maxInFlight: tenant.maxInFlight,
      reservationId: req.reservationId,
      ...(refusal === 'concurrency_limit' && summaryKind?.endsWith('|adopting')
        ? { adopting: true }
        : {}),
      ...(refusal === 'end_user_limit' && r[8] === 'key' && req.keyId
        ? { keyLimit: { keyId: req.keyId, maxEndUsers: keyMaxEndUsers ?? 0 } }
        : {}),
      promptTokens: req.promptTokens,
      maxTokens: max,
      ...shrinkFacts(tenant.mode, minOut, { input: Number(price[0]), output: Number(price[1]) }),
    }),
    {
      retryAfterSeconds: retry < 0 ? null : retry,
      budget: window?.budget ?? null,
      level: window?.tenant ?? null,
      ...(window ? { scope: window.scope ?? 'tenant' } : {}),
      neededTokens: Number(r[4]),
      neededMicroUsd: Number(r[5]),
      windows,
      ...(summaryKind && summaryFields
        ? { summary: { kind: summaryKind, fields: summaryFields } }
        : {}),
      ...(tracked ? { trackedFilter: { k: END_USER_FILTER_K, bits: tracked } } : {}),
    },
  );
}

/**
 * How many times an admission may ask for the keys of its adoption walk: the walk's copy of
 * an in-flight set, the records it holds, their windows (three), and twice more for the walk
 * moved on by other admissions between two runs.
 */
const ADOPT_ASKINGS = 5;

/**
 * An admission that still lacked keys after ADOPT_ASKINGS: other admissions kept moving the
 * walk on (a walk of many steps, many admissions at once). Refused as a walk not done is
 * (admit.lua: concurrency_limit, retry in 1 s), recorded as a refusal decided outside the
 * script; nothing was held.
 */
async function adoptionMovedOn(
  ctx: HandlerContext,
  tenant: CompiledTenant,
  req: AdmitRequest,
): Promise<Reply> {
  const recorded = await recordRefusal(ctx, tenant, req, 'concurrency_limit');
  if (!recorded.ok) return recorded;
  const inFlight = await withStore(ctx.logger, 'admit', () =>
    ctx.redis.zcard(ctx.keys.holds(tenant.org, tenant.id)),
  );
  if (!inFlight.ok) return inFlight;
  ctx.metrics.admissions.inc({ outcome: 'refused', code: 'concurrency_limit' });
  const facts = { neededTokens: 0, neededMicroUsd: 0, inFlight: inFlight.value, adopting: true };
  return refused(
    'concurrency_limit',
    refusalMessage({ code: 'concurrency_limit', tenant: tenant.id, ...facts }),
    { retryAfterSeconds: 1, summary: recorded.value },
  );
}

/** Declares the tenant's end-user registry and its filter; the registry's index in KEYS. */
function trackedUsers(keys: string[], ctx: HandlerContext, tenant: CompiledTenant): number {
  const at = keys.push(ctx.keys.users(tenant.org, tenant.id));
  keys.push(ctx.keys.usersFilter(tenant.org, tenant.id));
  return at;
}
