import { z } from 'zod';
import { envelopeFields, IsoTime } from '../envelope.js';
import { ModelId, PlainId, ServiceTierName, Uuid } from '../ids.js';
import { callFields, count, holdFields, windowsField } from './common.js';

export const ReservationCreated = z.object({
  ...envelopeFields,
  type: z.literal('reservation.created'),
  ...callFields,
  ...holdFields,
  promptTokens: count,
  /** max_tokens granted (after shrink-to-fit). */
  maxTokens: count,
  /** max_tokens the edge asked for. */
  requestedMaxTokens: count,
  /** Added to the windows' `used` by this event (estimate mode charges the prompt up front). */
  chargedTokens: count,
  chargedMicroUsd: count,
  expiresAt: IsoTime,
  /** The upstream whose declared capacity the call took; absent when it declares none. */
  upstream: PlainId.optional(),
  /**
   * The service tier the call is held at (the dearest it may be served at; `default`: the
   * model's base price), billed when its settle reports none. Absent: `default`.
   */
  serviceTier: ServiceTierName.optional(),
  /**
   * Held at its tier's long-context price (price.longContext): its admitted prompt count is
   * above the tier's line. Absent: false (short, or an event from before long-context prices).
   */
  longContext: z.boolean().optional(),
  /**
   * What the call could still bill past its hold, counted on each of its windows until it
   * closes: adaptive mode, a hold that cannot grow (its worst case less its estimate). Absent:
   * 0 (any other call, or an event from before it).
   */
  potentialTokens: count.optional(),
  potentialMicroUsd: count.optional(),
  /**
   * What its lease running out does (its tenant's `onExpiry` at admission, which its record
   * keeps): `bill` its worst case or `release` it. Absent: an event from before it (a rebuild
   * then takes the tenant's current `onExpiry`).
   */
  onExpiry: z.enum(['bill', 'release']).optional(),
  /**
   * The most its provider-run tools may bill (its bound on each tool's uses at its fee), part
   * of `heldMicroUsd` when it holds. Absent: 0 (no such tool, or an event from before it).
   */
  toolFeeBoundMicroUsd: count.optional(),
  /**
   * The tool-use fees its settle bills reported uses at, those of its model at admission (its
   * hold covered its bound at them): `kind:micro-USD per 1,000 uses` joined by ','. Present
   * with `toolFeeBoundMicroUsd`; absent: the model's fees when the call closes (no such tool,
   * or an event from before it).
   */
  toolPrices: z
    .string()
    .regex(/^[a-z_]+:\d+(,[a-z_]+:\d+)*$/)
    .optional(),
  ...windowsField,
});

/** A live hold grew to cover more output (adaptive mode, "holds that grow"). */
export const ReservationExtended = z.object({
  ...envelopeFields,
  type: z.literal('reservation.extended'),
  ...callFields,
  /** The hold after growing. */
  ...holdFields,
  addedTokens: count,
  addedMicroUsd: count,
  /** Output tokens the hold now covers. */
  coveredOutputTokens: count,
  ...windowsField,
});

/**
 * An admitted call went on to a fallback upstream (`capacity.move`: its first failed it, or the
 * team holds its share of that one's connections). Its worst case (`tokens`) was taken of the
 * fallback's declared capacity (`upstream`), at this event's time, and what its admission took
 * of `fromUpstream` was given back there, or settled to `fromUsedTokens` where the provider had
 * read and billed attempts there; its close then settles the fallback's. Its budgets do not
 * change (no windows): only the upstream capacity windows a rebuild replays do.
 */
export const ReservationMoved = z.object({
  ...envelopeFields,
  type: z.literal('reservation.moved'),
  reservationId: Uuid,
  model: ModelId,
  /** The fallback the call went on to (its capacity now holds the call's take, when declared). */
  upstream: PlainId,
  /** The upstream it left, whose take was closed; absent: its admission took none. */
  fromUpstream: PlainId.optional(),
  /** What was taken of the fallback: the call's prompt and max_tokens. */
  tokens: count,
  /** What `fromUpstream`'s take was settled to (attempts there billed); absent: given back. */
  fromUsedTokens: count.optional(),
  /**
   * Without `fromUsedTokens`: the provider answered an attempt on `fromUpstream` with an error,
   * so its take there kept the request and gave back only its tokens.
   */
  fromAnswered: z.boolean().optional(),
});

/**
 * A retry of an admitted call took one more request of the upstream its capacity is on
 * (`capacity.retry`, after its provider answered an attempt there: its account counted that
 * request), in this event's second. Kept in that upstream's minute whatever becomes of the
 * call, as live; the call's close still counts every retry in `retryRequests`, and a rebuild
 * counts there only those no `reservation.retried` of the call recorded (one lost between the
 * retry and its event, or an older authority's). Its budgets do not change (no windows).
 */
export const ReservationRetried = z.object({
  ...envelopeFields,
  type: z.literal('reservation.retried'),
  reservationId: Uuid,
  model: ModelId,
  /** The upstream the retry took its request of. */
  upstream: PlainId,
});

/**
 * The requests the call's retries took of the upstream its capacity is on (`capacity.retry`,
 * each after its provider answered an attempt there), kept in that upstream's minute whatever
 * the close: a rebuild counts them there. Absent: none.
 */
const retryRequestsField = { retryRequests: z.int().min(1).optional() };

const SETTLE_OUTCOMES = [
  'completed',
  'client_disconnected',
  'upstream_error',
  'timeout',
  'budget_exhausted',
] as const;
export const SettleOutcome = z.enum(SETTLE_OUTCOMES);
export type SettleOutcome = z.infer<typeof SettleOutcome>;

export const ReservationSettled = z.object({
  ...envelopeFields,
  type: z.literal('reservation.settled'),
  ...callFields,
  /** The hold given back. */
  ...holdFields,
  promptTokens: count,
  completionTokens: count,
  /** Parts of promptTokens: read from the provider's cache, and written to it (5 min, 1 h). */
  cachedPromptTokens: count,
  cacheWrite5mTokens: count.default(0),
  cacheWrite1hTokens: count.default(0),
  /** Part of completionTokens (billed as output). */
  reasoningTokens: count.default(0),
  /** Audio parts of promptTokens and completionTokens, each billed at its audio price. */
  audioPromptTokens: count.default(0),
  audioCompletionTokens: count.default(0),
  /**
   * The service tier billed: the one the provider reported serving the call at when the model
   * prices it (`default` for its base price, Anthropic's `standard` too), else the tier held.
   * Absent (events from before tiers): `default`.
   */
  serviceTier: ServiceTierName.optional(),
  /**
   * Billed at the billed tier's long-context price: the provider's input (promptTokens, cache
   * reads and writes included) is above its line. Absent: false.
   */
  longContext: z.boolean().optional(),
  /**
   * Uses of provider-run tools billed per use (web searches, file searches, ...) the provider
   * reported, all tools together. Absent: 0.
   */
  toolUses: count.optional(),
  /** What those uses cost at the model's `price.toolUses`, micro-USD: part of costMicroUsd. Absent: 0. */
  toolFeeMicroUsd: count.optional(),
  /** prompt + completion: the real usage billed by this call. */
  billedTokens: count,
  /**
   * The real cost billed by this call, integer micro-USD, each token category at its price,
   * and the tool fees (toolFeeMicroUsd).
   */
  costMicroUsd: count,
  /**
   * What this event added to the windows' `used`, at this event's time: the real usage, less
   * what was charged at admission (estimate mode). Negative when a precharge is refunded.
   * Summing charged* over a tenant's events in a window gives that window's `used`.
   */
  chargedTokens: z.int(),
  chargedMicroUsd: z.int(),
  outcome: SettleOutcome,
  /** Time from admission to settlement. */
  durationMs: count,
  ...retryRequestsField,
  ...windowsField,
});

const RELEASE_REASONS = [
  'upstream_error',
  'client_disconnected',
  'timeout',
  'not_forwarded',
  'admit_abandoned',
] as const;
export const ReleaseReason = z.enum(RELEASE_REASONS);
export type ReleaseReason = z.infer<typeof ReleaseReason>;

export const ReservationReleased = z.object({
  ...envelopeFields,
  type: z.literal('reservation.released'),
  ...callFields,
  ...holdFields,
  /**
   * What this event added to the windows' `used`, at this event's time: nothing (a release
   * bills nothing and keeps an estimate-mode precharge), or minus what an expiry billed when
   * the release came after it. Summing charged* over a tenant's events in a window gives that
   * window's `used`.
   */
  chargedTokens: z.int(),
  chargedMicroUsd: z.int(),
  reason: ReleaseReason,
  durationMs: count,
  ...retryRequestsField,
  /**
   * Requests of its upstream's capacity the release kept (its provider answered the call's
   * attempts with an error: its account counted them; the release's `answeredRequests`).
   * Absent: none, its request given back.
   */
  answeredRequests: z.int().min(1).optional(),
  ...windowsField,
});

export const ReservationExpired = z.object({
  ...envelopeFields,
  type: z.literal('reservation.expired'),
  ...callFields,
  ...holdFields,
  /**
   * What this event added to the windows' `used`, at this event's time: the hold's worst case
   * when the tenant's `onExpiry` is `bill` (nobody knows what the model billed; a later settle
   * corrects it), else 0. Summing charged* over a tenant's events in a window gives that
   * window's `used`.
   */
  chargedTokens: z.int(),
  chargedMicroUsd: z.int(),
  leaseMs: count,
  ...windowsField,
});

/**
 * The provider reported more usage than the hold paid for (a tokenizer that undercounted, an
 * upstream that ignored max_tokens). The truth was billed by the settlement this follows; this
 * event records the excess so it is never silent, and the tenant's windows carry it until they
 * free it (its next admissions pay it back before any new hold fits).
 */
export const ReservationOverrun = z.object({
  ...envelopeFields,
  type: z.literal('reservation.overrun'),
  ...callFields,
  /** What the hold (and any admission-time charge) covered. */
  ...holdFields,
  /** What the settlement billed. */
  billedTokens: count,
  costMicroUsd: count,
  /** billed - held, where positive (tokens and micro-USD separately). */
  overrunTokens: count,
  overrunMicroUsd: count,
  ...windowsField,
});

export type ReservationOverrun = z.infer<typeof ReservationOverrun>;
export type ReservationCreated = z.infer<typeof ReservationCreated>;
export type ReservationSettled = z.infer<typeof ReservationSettled>;
export type ReservationExtended = z.infer<typeof ReservationExtended>;
export type ReservationReleased = z.infer<typeof ReservationReleased>;
export type ReservationExpired = z.infer<typeof ReservationExpired>;
export type ReservationMoved = z.infer<typeof ReservationMoved>;
export type ReservationRetried = z.infer<typeof ReservationRetried>;
