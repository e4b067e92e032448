import { z } from 'zod';
import { LIMITS, ToolUseKind } from '../amounts.js';
import {
  EndUserId,
  ItemId,
  KeyId,
  MAX_ITEM_IDS,
  ModelId,
  PlainId,
  ResponseId,
  ServiceTierName,
  TenantId,
  Uuid,
} from '../ids.js';
import { ReleaseReason, SettleOutcome } from '../v1/reservation.js';
import { WindowState } from '../windows.js';

const tokens = z
  .int()
  .min(0)
  .max(LIMITS.maxPromptTokens + LIMITS.maxOutputTokens);

/**
 * What a call used, OpenAI-style: `promptTokens` is all input (cache reads and writes are parts
 * of it), `completionTokens` all output (reasoning is part of it). Each category is billed at
 * its own price (uncached input, cached input, 5-minute and 1-hour cache writes, output, audio
 * input and output); the
 * categories added later default to 0, so an older edge's settle still means what it meant.
 */
const UsageFields = z.strictObject({
  promptTokens: tokens,
  completionTokens: tokens,
  /** Prompt tokens served from the provider's cache (priced at cachedInputPerMTok). */
  cachedPromptTokens: tokens.default(0),
  /** Prompt tokens written to the provider's cache for 5 minutes (cacheWrite5mPerMTok). */
  cacheWrite5mTokens: tokens.default(0),
  /** Prompt tokens written to the provider's cache for 1 hour (cacheWrite1hPerMTok). */
  cacheWrite1hTokens: tokens.default(0),
  /** Output tokens spent reasoning (billed as output). */
  reasoningTokens: tokens.default(0),
  /** Prompt tokens of audio input (audioInputPerMTok). */
  audioPromptTokens: tokens.default(0),
  /** Completion tokens of audio output (audioOutputPerMTok). */
  audioCompletionTokens: tokens.default(0),
  /**
   * The service tier the provider reported serving the call at (OpenAI `service_tier`,
   * Anthropic `usage.service_tier`); absent: it reported none, and the tier held is billed.
   */
  serviceTier: ServiceTierName.optional(),
  /**
   * Uses of each provider-run tool the provider reported (Anthropic
   * `usage.server_tool_use.*_requests`, the Responses `*_call` output items): billed at the
   * model's `price.toolUses` on top of the tokens. Absent: none.
   */
  toolUses: z.partialRecord(ToolUseKind, z.int().min(0).max(LIMITS.maxReportedToolUses)).optional(),
  /**
   * The prompt (cache reads and writes included) of the call's largest request, when the call
   * made more than one (an attempt the provider failed inside its stream, then the retry):
   * `promptTokens` adds them, and a long-context line is the provider's per request, so the
   * settle decides long or short on this one. Absent: one request, `promptTokens`.
   */
  longestPromptTokens: tokens.optional(),
});

/**
 * What Usage's fields must satisfy together, beyond each field's own range: its refinements,
 * in order. The schema's `.refine`s and the authority's fast check (requestCheck) call these
 * same predicates.
 */
export const USAGE_RULES: readonly {
  holds: (u: z.output<typeof UsageFields>) => boolean;
  message: string;
  path: [string];
}[] = [
  {
    holds: (u) =>
      u.cachedPromptTokens + u.cacheWrite5mTokens + u.cacheWrite1hTokens <= u.promptTokens,
    message: 'cached and cache-write tokens must not exceed promptTokens',
    path: ['cachedPromptTokens'],
  },
  {
    holds: (u) => u.reasoningTokens <= u.completionTokens,
    message: 'reasoningTokens must not exceed completionTokens',
    path: ['reasoningTokens'],
  },
  {
    holds: (u) => u.audioPromptTokens <= u.promptTokens,
    message: 'audioPromptTokens must not exceed promptTokens',
    path: ['audioPromptTokens'],
  },
  {
    holds: (u) => u.audioCompletionTokens <= u.completionTokens,
    message: 'audioCompletionTokens must not exceed completionTokens',
    path: ['audioCompletionTokens'],
  },
  {
    holds: (u) => (u.longestPromptTokens ?? 0) <= u.promptTokens,
    message: 'longestPromptTokens must not exceed promptTokens',
    path: ['longestPromptTokens'],
  },
];

export const Usage = USAGE_RULES.reduce(
  (schema, rule) => schema.refine(rule.holds, { message: rule.message, path: rule.path }),
  UsageFields,
);
export type Usage = z.infer<typeof Usage>;

/** The most answered attempts a release may name (maxRetries is at most 10 an upstream). */
const MAX_ANSWERED_REQUESTS = 100;

/** The reservation a settle or release closes, and the call's parties whose windows it touches. */
const closeTarget = {
  reservationId: Uuid,
  tenant: TenantId,
  /** The org of the reservation (the admission's `org`); the tenant's current org if absent. */
  org: TenantId.optional(),
  /** The upstream whose capacity the admission reserved (its `upstream`). */
  upstream: PlainId.optional(),
  /** The model of the call (for a model's own capacity). */
  model: ModelId.optional(),
  /** The call's key and end user: their windows' states go in the event. */
  keyId: KeyId.nullable().optional(),
  endUser: EndUserId.optional(),
};

/** What the upstream stored for the call, recorded as the tenant's by a settle or a release. */
const storedOutput = {
  /**
   * The response the upstream stored for the call (Responses, `store` not false; on a release,
   * one it stored before the call failed): recorded as the tenant's for 30 days, so its calls,
   * and only its, may continue it (AdmitRequest.previousResponseId).
   */
  responseId: ResponseId.optional(),
  /**
   * The output items the upstream stored with that response (their ids): recorded as the
   * tenant's as the response is, so its calls, and only its, may read them by id
   * (AdmitRequest.itemIds).
   */
  itemIds: z.array(ItemId).min(1).max(MAX_ITEM_IDS).optional(),
};

export const SettleRequest = z.strictObject({
  ...closeTarget,
  usage: Usage,
  outcome: SettleOutcome.default('completed'),
  ...storedOutput,
});
export type SettleRequest = z.input<typeof SettleRequest>;

export const ReleaseRequest = z.strictObject({
  ...closeTarget,
  reason: ReleaseReason,
  /**
   * The attempts of the call that the upstream its capacity is on answered with an error (a
   * 429, a 5xx, a 400 about the request, or such an error first in its stream): requests its
   * account counted, so the release gives back the call's tokens and keeps these requests in
   * the upstream's minute (absent: none answered, both given back).
   */
  answeredRequests: z.int().min(1).max(MAX_ANSWERED_REQUESTS).optional(),
  ...storedOutput,
});
export type ReleaseRequest = z.infer<typeof ReleaseRequest>;

/** A settle or release left in the closes stream (`closesStream`) for the authority. */
export const DeferredClose = z.discriminatedUnion('op', [
  z.strictObject({ op: z.literal('settle'), request: SettleRequest }),
  z.strictObject({ op: z.literal('release'), request: ReleaseRequest }),
]);
export type DeferredClose = z.input<typeof DeferredClose>;

/**
 * What happened to the reservation. A second settle or release changes nothing and says why;
 * a release of an unknown id leaves a tombstone so a late admit with that id is refused.
 */
const CLOSE_STATUSES = [
  'settled',
  'released',
  'already_settled',
  'already_released',
  'already_expired',
  'unknown',
] as const;
export const CloseStatus = z.enum(CLOSE_STATUSES);
export type CloseStatus = z.infer<typeof CloseStatus>;

export const CloseReply = z.object({
  status: CloseStatus,
  billedTokens: z.int().min(0),
  costMicroUsd: z.int().min(0),
  windows: z.array(WindowState),
  /** What the settlement billed above the hold (a `reservation.overrun` was recorded). */
  overrunTokens: z.int().min(0).default(0),
  overrunMicroUsd: z.int().min(0).default(0),
});
export type CloseReply = z.infer<typeof CloseReply>;
