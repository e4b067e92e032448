import { z } from 'zod';
import { AdmissionMode } from '../amounts.js';
import { EndUserId, ModelId, PlainId, TenantId, Uuid } from '../ids.js';
import { WindowState } from '../windows.js';

/** Usage of one tenant, or of every tenant when `tenant` is absent. */
export const UsageRequest = z.strictObject({
  tenant: TenantId.optional(),
  /** One end user's windows (with `tenant`) instead of the most recently seen ones. */
  endUser: EndUserId.optional(),
});
export type UsageRequest = z.infer<typeof UsageRequest>;

export const TenantUsage = z.object({
  tenant: TenantId,
  parent: TenantId.nullable(),
  mode: AdmissionMode,
  suspended: z.boolean(),
  /** Who holds the suspension (the alerter at a hard limit, an admin); empty when not. */
  suspendedBy: z.array(z.enum(['alerter', 'admin'])).default([]),
  /** Settlements that billed more than their hold (lifetime): see `reservation.overrun`. */
  overruns: z
    .object({
      count: z.int().min(0),
      tokens: z.int().min(0),
      microUsd: z.int().min(0),
      lastAt: z.iso.datetime().nullable(),
    })
    .default({ count: 0, tokens: 0, microUsd: 0, lastAt: null }),
  inFlight: z.int().min(0),
  maxInFlight: z.int().min(0).nullable(),
  /** Lifetime totals billed by the authority (the drift audit compares these). */
  billedTokens: z.int().min(0),
  billedMicroUsd: z.int().min(0),
  /** The tenant's own windows, then its ancestors'. */
  windows: z.array(WindowState),
  /** Soft thresholds per budget id, for status pages. */
  thresholds: z.record(z.string(), z.array(z.number())),
  /** Keys with budgets of their own, and their windows. */
  keys: z.array(z.object({ id: z.string(), windows: z.array(WindowState) })).default([]),
  /** End users with budgets (the most recently seen first, at most 100), and their windows. */
  endUsers: z
    .array(z.object({ id: z.string(), lastSeen: z.iso.datetime(), windows: z.array(WindowState) }))
    .default([]),
  /** End users tracked in all. */
  endUserCount: z.int().min(0).default(0),
});
export type TenantUsage = z.infer<typeof TenantUsage>;

/** An upstream's (or a model's) declared capacity and what the last minute used of it. */
export const CapacityUsage = z.object({
  upstream: z.string(),
  /** null: the upstream's own limits; else this model's on it. */
  model: z.string().nullable(),
  tokensPerMinute: z.int().min(0).nullable(),
  requestsPerMinute: z.int().min(0).nullable(),
  tokens: z.int(),
  requests: z.int(),
  /** Until when the provider said it refuses calls (its 429), if it did. */
  blockedUntil: z.iso.datetime().nullable(),
  /** The upstream's row: its counting endpoint's limit (`countsPerMinute`) and its last minute. */
  countsPerMinute: z.int().min(0).nullable().default(null),
  counts: z.int().min(0).default(0),
});
export type CapacityUsage = z.infer<typeof CapacityUsage>;

export const UsageReply = z.object({
  time: z.iso.datetime(),
  tenants: z.array(TenantUsage),
  /** Declared upstream capacity (read when every tenant is asked for). */
  capacity: z.array(CapacityUsage).default([]),
});
export type UsageReply = z.infer<typeof UsageReply>;

export const SuspendRequest = z.strictObject({
  tenant: TenantId,
  reason: z.string().min(1).max(500),
  by: z.enum(['alerter', 'admin']),
  /** The budget at its hard limit, when the alerter suspends. */
  budget: z.string().max(32).nullable().default(null),
  /** Calls in flight may settle for this long; new calls are refused at once. */
  graceMs: z.int().min(0).max(3_600_000).default(0),
});
export type SuspendRequest = z.input<typeof SuspendRequest>;

export const ResumeRequest = z.strictObject({
  tenant: TenantId,
  by: z.enum(['admin', 'window_freed']),
});
export type ResumeRequest = z.infer<typeof ResumeRequest>;

export const SuspensionReply = z.object({
  tenant: TenantId,
  suspended: z.boolean(),
  /** false when nothing changed (the owner already held it, or held none). */
  changed: z.boolean(),
  /** Who holds the suspension after this request. */
  suspendedBy: z.array(z.enum(['alerter', 'admin'])).default([]),
});
export type SuspensionReply = z.infer<typeof SuspensionReply>;

/**
 * One difference between the last declared document (the config file, or `holdfast apply`)
 * and the stored config: a change made through the admin API since, at a path that names list
 * items by id (`tenants[id=support-bot].keys[id=ops-1]`).
 */
export const ConfigChange = z.object({
  path: z.string(),
  change: z.enum(['added', 'changed', 'removed']),
});
export type ConfigChange = z.infer<typeof ConfigChange>;

/**
 * The most changes one reply lists (`divergence`, `kept`, `overridden`; the counts say how many
 * there are in all). A path is at most about 210 bytes as JSON, so 500 of them (~105 KB) beside
 * a document at its limit (768 KiB) keep config.get within NATS's default max_payload (1 MiB):
 * the whole list grows with every admin edit (about 70 bytes a key created), and at some 5,000
 * keys made through the admin API it alone made config.get too large for any edge to load.
 */
export const CONFIG_CHANGES_LISTED = 500;

/** The last declarative document applied (file or `holdfast apply`), the base of the next merge. */
export const DeclaredConfig = z.object({
  /** The stored config version it was applied at. */
  version: z.int().min(0),
  hash: z.string(),
  source: z.string(),
  time: z.iso.datetime(),
});
export type DeclaredConfig = z.infer<typeof DeclaredConfig>;

/** What a provider said of its limits: a 429's Retry-After, or the tokens it has left. */
export const CapacityReportRequest = z.strictObject({
  upstream: PlainId,
  model: z.string().max(128).optional(),
  retryAfterMs: z.int().min(0).max(3_600_000).optional(),
  remainingTokens: z.int().min(0).max(1e12).optional(),
  resetMs: z.int().min(0).max(3_600_000).optional(),
});
export type CapacityReportRequest = z.infer<typeof CapacityReportRequest>;
export const CapacityReportReply = z.object({ recorded: z.boolean() });

/**
 * A team's request to an upstream's token-counting endpoint, taken of the upstream's
 * `countsPerMinute` (the provider's limit on it, which every team shares) before it is sent.
 */
export const CapacityCountRequest = z.strictObject({
  tenant: TenantId,
  upstream: PlainId,
});
export type CapacityCountRequest = z.infer<typeof CapacityCountRequest>;
/**
 * `taken`: send it (also when the upstream declares no `countsPerMinute`). Else the minute's
 * requests are taken, by the team's share (`who: tenant`) or by every team of its priority
 * (`all`): ask again in `retryAfterSeconds`.
 */
export const CapacityCountReply = z.discriminatedUnion('taken', [
  z.object({ taken: z.literal(true) }),
  z.object({
    taken: z.literal(false),
    retryAfterSeconds: z.int().min(1).max(3_600),
    who: z.enum(['all', 'tenant']),
  }),
]);
export type CapacityCountReply = z.infer<typeof CapacityCountReply>;

/**
 * An admitted call that goes on to a fallback upstream (its first answered 429/5xx, or the
 * team holds its share of its connections): its capacity is taken of the fallback (`to`) as its
 * admission took it of `from` (the same tokens, the team's priority share and `tenantShare`),
 * and then given back to `from`. `from` absent: the admission took none (its upstream declares
 * none).
 */
export const CapacityMoveRequest = z.strictObject({
  reservationId: Uuid,
  tenant: TenantId,
  /**
   * The org the hold lives in (the admission's reply said so), as closes name it: a move works
   * after the team moved to another org. Absent: the team's org now.
   */
  org: TenantId.optional(),
  model: ModelId,
  from: PlainId.optional(),
  to: PlainId,
  tokens: z.int().min(0).max(100_000_000),
  /**
   * What the call's attempts on `from` were billed (each failed inside its stream after the
   * provider read it, which its account counted): `from`'s take is settled to it, as a close
   * settles, instead of given back. Absent: nothing reached the provider there.
   */
  fromUsedTokens: z.int().min(0).max(100_000_000).optional(),
  /**
   * An attempt on `from` was answered by the provider (a 429 or 5xx): its account counted the
   * request, so `from` keeps it counted and gives back only the tokens. Absent: none reached it.
   */
  fromAnswered: z.boolean().optional(),
});
export type CapacityMoveRequest = z.infer<typeof CapacityMoveRequest>;
/** `moved`: send the call to `to`; else `to` has no room for it (`from`'s take stays). */
export const CapacityMoveReply = z.object({ moved: z.boolean() });
export type CapacityMoveReply = z.infer<typeof CapacityMoveReply>;

/**
 * An admitted call about to be retried on the same upstream after the provider answered an
 * attempt there (a 429 or 5xx, or an error inside its stream): the provider's account counted
 * that request, so the retry is one more request of the upstream's `requestsPerMinute`, taken
 * as an admission takes it (the tenant's priority share and `tenantShare`), in the second it
 * is made, and kept there for the minute (never given back: the provider counted it).
 */
export const CapacityRetryRequest = z.strictObject({
  reservationId: Uuid,
  tenant: TenantId,
  /**
   * The org the hold lives in (the admission's reply said so), as closes and moves name it: a
   * retry works after the team moved to another org. Absent: the team's org now.
   */
  org: TenantId.optional(),
  model: ModelId,
  /** The upstream the retry goes to (the one the call's capacity is on). */
  upstream: PlainId,
});
export type CapacityRetryRequest = z.infer<typeof CapacityRetryRequest>;
/** `taken`: make the retry; else the upstream has no request left for it this minute. */
export const CapacityRetryReply = z.object({ taken: z.boolean() });
export type CapacityRetryReply = z.infer<typeof CapacityRetryReply>;

export const ConfigGetRequest = z.strictObject({});
export const ConfigGetReply = z.object({
  version: z.int().min(0),
  hash: z.string(),
  /** The validated config document (parse it with @holdfast/config). */
  config: z.unknown(),
  /** The last declared document; null when none was recorded (an older authority's store). */
  declared: DeclaredConfig.nullable().default(null),
  /**
   * What the admin API changed since that document: the next merge keeps these. At most
   * CONFIG_CHANGES_LISTED of them; `divergenceCount` is how many there are in all.
   */
  divergence: z.array(ConfigChange).default([]),
  divergenceCount: z.int().min(0).optional(),
});
export type ConfigGetReply = z.infer<typeof ConfigGetReply>;

/**
 * How a document is applied:
 * - `edit`: it is the new stored config as it is (a read-modify-write of the admin API, whose
 *   document came from config.get); the declared document stays.
 * - `merge`: it is a declarative document (the config file, `holdfast apply`): what it changes
 *   since the last declared document is applied, what the admin API changed since, and the
 *   document leaves alone, is kept; where both changed the same field the document wins. Both
 *   lists come back in the reply.
 * - `replace`: the stored config becomes exactly the document; what the admin API had changed
 *   is reported as overridden.
 */
const CONFIG_APPLY_MODES = ['edit', 'merge', 'replace'] as const;
export const ConfigApplyMode = z.enum(CONFIG_APPLY_MODES);
export type ConfigApplyMode = z.infer<typeof ConfigApplyMode>;

export const ConfigApplyRequest = z.strictObject({
  /** The raw document (YAML text or an already-parsed object). */
  document: z.union([z.string().max(5_000_000), z.record(z.string(), z.unknown())]),
  source: z.string().max(200).default('api'),
  /**
   * Optimistic concurrency: apply only if the stored config is still at this version (0: none
   * applied yet); otherwise the reply is a `version_conflict` error and nothing changes.
   */
  expectedVersion: z.int().min(0).optional(),
  mode: ConfigApplyMode.default('edit'),
});
export type ConfigApplyRequest = z.input<typeof ConfigApplyRequest>;

export const ConfigApplyReply = z.object({
  version: z.int().min(1),
  hash: z.string(),
  changed: z.boolean(),
  /** merge: changes made through the admin API that the document left alone (still there). */
  kept: z.array(ConfigChange).default([]),
  /** merge and replace: changes made through the admin API that the document undid. */
  overridden: z.array(ConfigChange).default([]),
  /** How many changes each list has in all (each lists at most CONFIG_CHANGES_LISTED). */
  keptCount: z.int().min(0).optional(),
  overriddenCount: z.int().min(0).optional(),
});
export type ConfigApplyReply = z.infer<typeof ConfigApplyReply>;
