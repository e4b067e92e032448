import { z } from 'zod';
import { AdmissionMode, ApiSurface, LIMITS, ToolUseKind } from '../amounts.js';
import { IsoTime } from '../envelope.js';
import {
  EndUserId,
  KeyId,
  ItemId,
  MAX_ITEM_IDS,
  ModelId,
  PlainId,
  ResponseId,
  ServiceTierName,
  TenantId,
  UseCaseId,
  Uuid,
} from '../ids.js';
import { RefusalCode } from '../v1/admission.js';
import { BudgetId, WindowState } from '../windows.js';
import { EndUserFilter } from './end-user-filter.js';

export const AdmitRequest = z.strictObject({
  /** Chosen by the edge, so a retried admit is idempotent and a late one can be fenced. */
  reservationId: Uuid,
  tenant: TenantId,
  keyId: KeyId.nullable(),
  /** The call's end user (for the tenant's end-user budgets), if the client named one. */
  endUser: EndUserId.optional(),
  useCase: UseCaseId,
  model: ModelId,
  /** The surface the call came in on; recorded on the reservation and its events. */
  api: ApiSurface.default('chat'),
  /** The prompt as the edge counted it (0 with `uncounted`). */
  promptTokens: z.int().min(0).max(LIMITS.maxPromptTokens),
  /**
   * The edge has not counted the prompt: its config says the call is not registered (use case,
   * model), or only the upstream can count it. Such an admit is evaluated with the prompt taken
   * as 0 and never admitted: a call the authority's config does not register, or that would be
   * refused even so (a budget, a cap on calls in flight, a suspension), is refused and recorded
   * as any other; else it is answered `not_counted`, nothing held or taken, and the edge counts
   * the prompt and asks again. So a call refused anyway costs no count, and no request to the
   * upstream's counting endpoint.
   */
  uncounted: z.literal(true).optional(),
  /**
   * The edge remembers a team's end-user cap (its refusal memory is on): an `end_user_limit`
   * refusal carries the end users the team tracks (Refused `trackedFilter`). Absent: never, so
   * an edge that would not use it costs no filter (built from up to END_USER_FILTER_MAX ids).
   */
  rememberEndUserCap: z.literal(true).optional(),
  /** max_tokens after the edge's clamp. */
  maxTokens: z.int().min(1).max(LIMITS.maxOutputTokens),
  /** Lease of the hold; the authority's default (30 min) when absent. */
  leaseMs: z.int().min(1_000).max(LIMITS.maxLeaseMs).optional(),
  /** Shrink to fit: admit with a lower max_tokens, down to this many output tokens. */
  minOutputTokens: z.int().min(1).max(LIMITS.maxOutputTokens).optional(),
  /**
   * adaptive mode: true when the caller will grow the hold (`extend`) as output arrives, so the
   * hold may start at the estimate with no debt. false: the overrun must fit the debt bound.
   */
  extensible: z.boolean().default(false),
  /**
   * The call sends audio (Chat Completions `input_audio` parts): its prompt is held at the
   * dearer of the model's text and audio input prices.
   */
  audioInput: z.boolean().default(false),
  /**
   * The call asks for audio output (Chat Completions `modalities: ["audio"]`): its output is
   * held at the dearer of the model's text and audio output prices.
   */
  audioOutput: z.boolean().default(false),
  /**
   * The service tier the call is held at: the dearest it may be served at (the edge decides
   * from the client's `service_tier` and the model's prices). `default`: the base price; any
   * other must be priced in the model's `price.serviceTiers`. A settle that reports no tier
   * is billed at it.
   */
  serviceTier: ServiceTierName.default('default'),
  /**
   * The most uses of each provider-run tool billed per use (`price.toolUses`) the call may
   * make, as the edge bounded them (Anthropic `max_uses`, Responses `max_tool_calls`): held at
   * the model's fee for each on top of its tokens. Absent: none.
   */
  toolUses: z.partialRecord(ToolUseKind, z.int().min(1).max(LIMITS.maxToolUses)).optional(),
  /**
   * The stored response the call continues (Responses `previous_response_id`): admitted only
   * when the tenant owns it (a settle of its own recorded it, SettleRequest.responseId), else
   * refused `response_not_found` before anything is held or taken, whether the id is another
   * tenant's or nobody's. Every tenant goes through the same upstream account, whose stored
   * responses any id opens.
   */
  previousResponseId: ResponseId.optional(),
  /**
   * The stored items the call's input reads by id (Responses `item_reference`, a reasoning item
   * without its content): admitted only when the tenant owns each (a settle of its own recorded
   * it, SettleRequest.itemIds), else refused `item_not_found` as previousResponseId is.
   */
  itemIds: z.array(ItemId).min(1).max(MAX_ITEM_IDS).optional(),
  /**
   * The config version the edge serves. A replica on an older one (the config.changed notice
   * not heard yet, or lost: its poll is 2 s) loads the stored config before it decides, so a
   * limit an admin lowered, or a tenant, key or budget just made, is decided as the edge knows it.
   */
  configVersion: z.int().min(0).optional(),
});
export type AdmitRequest = z.input<typeof AdmitRequest>;

/**
 * Whether the tenant owns what a request names by id (a count's: `/v1/messages/count_tokens`,
 * `/v1/responses/input_tokens`), checked as an admit checks them (AdmitRequest
 * previousResponseId and itemIds) and nothing else: read-only, nothing held or taken, no
 * refusal or event recorded. Names at least one id. Answered `{ owned: true }`, or the admit's
 * error: `response_not_found` or `item_not_found` (its message names the id).
 */
export const OwnsRequest = z
  .strictObject({
    tenant: TenantId,
    previousResponseId: ResponseId.optional(),
    itemIds: z.array(ItemId).min(1).max(MAX_ITEM_IDS).optional(),
  })
  .refine((r) => r.previousResponseId !== undefined || r.itemIds !== undefined, {
    message: 'name a previousResponseId or itemIds',
  });
export type OwnsRequest = z.input<typeof OwnsRequest>;
export const OwnsReply = z.strictObject({ owned: z.literal(true) });
export type OwnsReply = z.infer<typeof OwnsReply>;

export const Admitted = z.object({
  admitted: z.literal(true),
  reservationId: Uuid,
  /** The org the reservation lives in: closes name it, so they work after the tenant moved. */
  org: TenantId.optional(),
  /**
   * The upstream whose capacity the call reserved (the model's first, or a fallback when the
   * first was full); the edge sends the call there first. Absent: no capacity is declared.
   */
  upstream: PlainId.optional(),
  mode: AdmissionMode,
  heldTokens: z.int().min(0),
  heldMicroUsd: z.int().min(0),
  /** The max_tokens the call may use: lower than asked when shrink-to-fit applied. */
  maxTokens: z.int().min(1),
  shrunk: z.boolean(),
  expiresAt: IsoTime,
  /** true when this reservation already existed (a retried admit). */
  duplicate: z.boolean(),
  /** Output tokens the hold covers: maxTokens, or less in adaptive mode (grow it with extend). */
  coveredOutputTokens: z.int().min(0),
  windows: z.array(WindowState),
});

export const Refused = z.object({
  admitted: z.literal(false),
  code: RefusalCode,
  /** Says why in numbers; shown to the caller as is. */
  message: z.string(),
  /** null when waiting cannot help (the call is larger than the limit). */
  retryAfterSeconds: z.int().min(0).nullable(),
  budget: BudgetId.nullable(),
  level: TenantId.nullable(),
  /**
   * Whose budget refused (`budget`, of `level`): the tenant's own, or one of its keys' or end
   * users' (their ids are alike: `month-tokens`). Absent from older authorities and where no
   * budget refused.
   */
  scope: z.enum(['tenant', 'key', 'end_user']).optional(),
  neededTokens: z.int().min(0),
  neededMicroUsd: z.int().min(0),
  windows: z.array(WindowState),
  /**
   * A `budget_exceeded`, `concurrency_limit`, `tenant_suspended`, `use_case_not_registered`,
   * `model_not_allowed` or `end_user_limit` refusal's summary key and event fields
   * (admit.lua `refuse`, admit.ts `recordRefusal`), opaque to the edge: an edge that answers the same call again itself
   * (its refusal memory) counts those refusals under them (`refusals.report`), so each still
   * ends in an `admission.refused` event. Absent from older authorities and on other codes.
   */
  summary: z.object({ kind: z.string().max(2_048), fields: z.string().max(16_384) }).optional(),
  /**
   * An `end_user_limit` of the tenant's own `maxEndUsers` (not a key's): the end users the
   * tenant tracks (ids as admission keys them) as a Bloom filter (end-user-filter.ts), so an
   * edge refuses a call naming none of them itself for a moment (its refusal memory) and asks
   * the authority of the others, which may be admitted (a new end user the filter holds by
   * chance, about 1 in 400, is asked too). Absent when the tenant tracks more than
   * END_USER_FILTER_MAX, from older authorities and on other codes.
   */
  trackedFilter: EndUserFilter.optional(),
});

export const AdmitReply = z.discriminatedUnion('admitted', [Admitted, Refused]);
export type AdmitReply = z.infer<typeof AdmitReply>;
export type Admitted = z.infer<typeof Admitted>;
export type Refused = z.infer<typeof Refused>;

export const ExtendRequest = z.strictObject({
  reservationId: Uuid,
  tenant: TenantId,
  /** The org of the reservation (the admission's `org`); the tenant's current org if absent. */
  org: TenantId.optional(),
  /** The call's key and end user: their budgets' limits are checked too. */
  keyId: KeyId.nullable().optional(),
  endUser: EndUserId.optional(),
  /** The total output tokens the hold should cover (capped at the call's max_tokens). */
  outputTokens: z.int().min(1).max(LIMITS.maxOutputTokens),
  /**
   * What an attempt of the call that failed inside its stream billed, before the edge retries
   * the call on this hold: the hold grows by it (the prompt at the hold's input price, the
   * output at its output price, the provider-run tool uses at the fees the hold was admitted
   * with) on every window it is on, all or nothing, whatever the output it covers
   * (`outputTokens` is then not read). `refused`: a window has no room for it.
   */
  billed: z
    .strictObject({
      promptTokens: z.int().min(0).max(LIMITS.maxPromptTokens),
      outputTokens: z.int().min(0).max(LIMITS.maxOutputTokens),
      toolUses: z
        .partialRecord(ToolUseKind, z.int().min(0).max(LIMITS.maxReportedToolUses))
        .optional(),
    })
    .optional(),
  /**
   * The call's model: prices `billed.toolUses` on a hold recorded without the fees it was
   * admitted with (one rebuilt from the stream), as a settle does.
   */
  model: ModelId.optional(),
  /**
   * The config version the edge serves, as on AdmitRequest: a replica on an older one loads
   * the stored config first, so a hold never grows past a limit an admin just lowered.
   */
  configVersion: z.int().min(0).optional(),
});
export type ExtendRequest = z.infer<typeof ExtendRequest>;

export const ExtendReply = z.object({
  /** refused: a window has no room: end the call (finish_reason length). */
  status: z.enum(['extended', 'unchanged', 'refused', 'closed', 'unknown']),
  heldTokens: z.int().min(0),
  heldMicroUsd: z.int().min(0),
  coveredOutputTokens: z.int().min(0),
  windows: z.array(WindowState),
});
export type ExtendReply = z.infer<typeof ExtendReply>;

/** Extends a live hold's lease (a call still running when half its lease has passed). */
export const RenewRequest = z.strictObject({
  reservationId: Uuid,
  tenant: TenantId,
  org: TenantId.optional(),
});
export type RenewRequest = z.infer<typeof RenewRequest>;

export const RenewReply = z.object({
  status: z.enum(['renewed', 'closed', 'unknown']),
  expiresAt: IsoTime.nullable(),
});
export type RenewReply = z.infer<typeof RenewReply>;

/**
 * Refusals an edge answered itself, repeats of one the authority made (Refused `summary`):
 * counted into the org's refusal summaries, written as one `admission.refused` event per kind
 * with its `count` within about a second.
 */
export const RefusalsReportRequest = z.strictObject({
  items: z
    .array(
      z.strictObject({
        /** Chosen by the edge, once per item: a retried report counts nothing twice. */
        id: Uuid,
        tenant: TenantId,
        /**
         * The tenant's org when the edge refused: where the count goes if the tenant has left
         * the authority's config since (its current org otherwise). Absent from older edges.
         */
        org: TenantId.optional(),
        kind: z.string().min(1).max(2_048),
        fields: z.string().min(2).max(16_384),
        count: z.int().min(1).max(1_000_000_000),
      }),
    )
    .min(1)
    .max(256),
});
export type RefusalsReportRequest = z.infer<typeof RefusalsReportRequest>;
/** How many of the items were counted (an item of an unknown tenant and org, or one not a refusal it made, is not). */
export const RefusalsReportReply = z.object({ recorded: z.int().min(0) });
export type RefusalsReportReply = z.infer<typeof RefusalsReportReply>;
