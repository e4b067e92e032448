import { z } from 'zod';

/** The authority's request-reply operations; subject `<authorityPrefix>.<operation>`. */
export type AuthorityOperation =
  | 'admit'
  | 'owns'
  | 'extend'
  | 'renew'
  | 'settle'
  | 'release'
  | 'usage'
  | 'suspend'
  | 'resume'
  | 'config.get'
  | 'config.apply'
  | 'capacity.report'
  | 'capacity.count'
  | 'capacity.move'
  | 'capacity.retry'
  | 'refusals.report'
  | 'batch';

/**
 * The operations one `batch` request may carry: those of a call's path, which an edge under
 * load asks for many at the same moment. Each item is answered as if it came alone.
 */
const BATCHED_OPERATIONS = ['admit', 'extend', 'renew', 'settle', 'release'] as const;
export type BatchedOperation = (typeof BATCHED_OPERATIONS)[number];

/** Most items one batch carries (each is a few hundred bytes: far below NATS's payload limit). */
export const MAX_BATCH_ITEMS = 64;

/** Several requests in one message; each `body` is checked against its operation's schema. */
export const BatchRequest = z.strictObject({
  items: z
    .array(z.strictObject({ op: z.enum(BATCHED_OPERATIONS), body: z.unknown() }))
    .min(1)
    .max(MAX_BATCH_ITEMS),
});
export type BatchRequest = z.infer<typeof BatchRequest>;

/**
 * One item's answer, by its index in the request: its reply, or its error. Inside a batch an
 * item's error travels in the body (one message carries many answers); an error of the batch
 * itself (it does not parse) travels in headers like any other.
 */
const BatchItemReply = z.discriminatedUnion('ok', [
  z.strictObject({ i: z.int().min(0), ok: z.literal(true), value: z.unknown() }),
  z.strictObject({
    i: z.int().min(0),
    ok: z.literal(false),
    code: z.string().max(64),
    message: z.string(),
  }),
]);

/**
 * Answers to a batch: every item is answered once, by one of possibly several replies (those
 * ready together go together; one that takes long, say its org's Redis node is failing over,
 * comes later on its own, and does not hold up the others).
 */
export const BatchReply = z.strictObject({ items: z.array(BatchItemReply) });
export type BatchReply = z.infer<typeof BatchReply>;

/** Queue group every authority replica joins, so each request is answered once. */
export const AUTHORITY_QUEUE = 'holdfast-authority';

/**
 * Errors travel in headers, never as free-form bodies. A reply with `Holdfast-Error` set has
 * an empty body; refusals (budget exceeded, ...) are normal replies, not errors.
 */
export const ERROR_HEADER = 'Holdfast-Error';
export const ERROR_MESSAGE_HEADER = 'Holdfast-Error-Message';

export type AuthorityErrorCode =
  /** The request did not match its schema. Nothing changed. */
  | 'invalid_request'
  /**
   * An admit asks for a price the authority's config does not have (a service tier the model
   * does not price): the edge's config is behind the authority's. Nothing held or taken.
   */
  | 'not_priced'
  /**
   * An `uncounted` admit of a call the authority's config registers and that would fit with
   * an empty prompt. Nothing held or taken; the edge counts the prompt and asks again.
   */
  | 'not_counted'
  /**
   * An admit or an owns continues a stored response (`previousResponseId`) its tenant does not own: another
   * tenant's, or one nobody recorded. Nothing held or taken, no refusal recorded.
   */
  | 'response_not_found'
  /**
   * An admit or an owns reads stored items by id (`itemIds`) its tenant does not own: another tenant's, or
   * ones nobody recorded. Nothing held or taken, no refusal recorded.
   */
  | 'item_not_found'
  /** Redis did not answer: fail closed, nothing admitted. */
  | 'budget_store_unavailable'
  /** The config document was rejected; the message names the fields. */
  | 'invalid_config'
  /** config.apply with an `expectedVersion` that is no longer the stored one. Nothing changed. */
  | 'version_conflict'
  /**
   * The reply was over the NATS server's max_payload, so it could not be sent: the request was
   * handled (a config.apply did apply), only its answer is lost. Ask for less (one tenant's
   * usage), or raise max_payload. Logged by the authority as `reply too large`.
   */
  | 'reply_too_large'
  /** A bug; details are in the authority's log. */
  | 'internal';
