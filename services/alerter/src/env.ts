import { env } from '@holdfast/config';
import type { NatsNames } from '@holdfast/events';
import { loadServiceConfig, serviceEnv } from '@holdfast/runtime';
import type { RetryPolicy } from '@holdfast/retry';
import { z } from 'zod';

/** The alerter's environment. Every variable has a default a local run can use. */
const AlerterEnv = serviceEnv({
  /** Config file (YAML/JSON). Unset: the config is read from the authority (`config.get`). */
  HOLDFAST_CONFIG: z.string().min(1).optional(),
  /** /healthz, /readyz and /metrics. */
  ALERTER_OPS_PORT: env.port(9103),
  /** Durable consumer name on the events stream, shared by every replica. */
  ALERTER_CONSUMER: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/)
    .default('alerter'),
  /** Events handled at once per replica (events of one org are always handled in order). */
  ALERTER_EVENT_CONCURRENCY: env.int(64, 1, 4_096),
  /**
   * Events in bursts: one pull of what is stored (up to ALERTER_EVENT_CONCURRENCY) every this
   * many ms, a full one followed at once, so one socket read carries many events (about half
   * the CPU per event, docs/benchmarks.md). Events wait up to this long more, far inside the
   * 5 s an alert is due in. 0: each event delivered as it is stored (consume()).
   */
  ALERTER_PULL_EVERY_MS: env.int(250, 0, 60_000),
  /** Webhook deliveries in flight per replica. */
  ALERTER_WEBHOOK_CONCURRENCY: env.int(32, 1, 1_024),
  /**
   * Of them, the most one webhook may have in flight: a receiver that hangs until the timeout
   * cannot hold up the others' deliveries.
   */
  ALERTER_WEBHOOK_CONCURRENCY_PER_HOOK: env.int(8, 1, 1_024),
  /** One delivery attempt gives up after this long. */
  ALERTER_WEBHOOK_TIMEOUT_MS: env.int(10_000, 100, 120_000),
  /** First retry delay; each next one doubles (with jitter) up to the max. */
  ALERTER_WEBHOOK_RETRY_INITIAL_MS: env.int(2_000, 10),
  ALERTER_WEBHOOK_RETRY_MAX_MS: env.int(600_000, 10),
  /** A delivery still failing this long after it was queued is dead-lettered (6 h). */
  ALERTER_WEBHOOK_RETRY_FOR_MS: env.int(21_600_000, 100),
  /**
   * How often each webhook's delivered jobs are purged from the queue (up to its consumer's ack
   * floor). The queue keeps acked jobs until then (limits retention, webhook/queue.ts).
   */
  ALERTER_WEBHOOK_PURGE_EVERY_MS: env.int(60_000, 100, 3_600_000),
  /** How often the authority's usage is read, to resume tenants whose window freed room. */
  ALERTER_USAGE_POLL_MS: env.int(5_000, 50, 3_600_000),
  /** Burn rate: settled usage over this trailing period. */
  ALERTER_BURN_LOOKBACK_MS: env.int(600_000, 1_000, 86_400_000),
  /** Burn samples are merged into the shared state this often. */
  ALERTER_BURN_FLUSH_MS: env.int(1_000, 50, 60_000),
}).superRefine((e, ctx) => {
  if (e.ALERTER_WEBHOOK_RETRY_INITIAL_MS > e.ALERTER_WEBHOOK_RETRY_MAX_MS) {
    ctx.addIssue({
      code: 'custom',
      path: ['ALERTER_WEBHOOK_RETRY_INITIAL_MS'],
      message: 'must not exceed ALERTER_WEBHOOK_RETRY_MAX_MS',
    });
  }
});
type AlerterEnv = z.infer<typeof AlerterEnv>;

/** Tunables of a running alerter (what tests shorten). */
export interface AlerterSettings {
  consumer: string;
  eventConcurrency: number;
  /** Pull events in bursts this often (ms); 0: consume(). */
  pullEveryMs: number;
  webhookConcurrency: number;
  /** The most of them one webhook may have (ALERTER_WEBHOOK_CONCURRENCY_PER_HOOK). */
  webhookConcurrencyPerHook: number;
  webhookTimeoutMs: number;
  retry: WebhookRetryPolicy;
  /** Purge each webhook's delivered jobs this often (ALERTER_WEBHOOK_PURGE_EVERY_MS). */
  webhookPurgeEveryMs: number;
  usagePollMs: number;
  burnLookbackMs: number;
  burnFlushMs: number;
  /** Replicas of the streams and the KV bucket the alerter creates. */
  streamReplicas: number;
}

/**
 * Webhook retries: the shared policy (equal jitter unless it says otherwise, see
 * webhook/retry.ts) that always has a time limit: give up (dead-letter) when the next attempt
 * would be later than `retryForMs` after queueing.
 */
export type WebhookRetryPolicy = RetryPolicy & { retryForMs: number };

export const DEFAULT_SETTINGS: AlerterSettings = settingsFromEnv(AlerterEnv.parse({}));

function settingsFromEnv(e: AlerterEnv): AlerterSettings {
  return {
    consumer: e.ALERTER_CONSUMER,
    eventConcurrency: e.ALERTER_EVENT_CONCURRENCY,
    pullEveryMs: e.ALERTER_PULL_EVERY_MS,
    webhookConcurrency: e.ALERTER_WEBHOOK_CONCURRENCY,
    webhookConcurrencyPerHook: e.ALERTER_WEBHOOK_CONCURRENCY_PER_HOOK,
    webhookTimeoutMs: e.ALERTER_WEBHOOK_TIMEOUT_MS,
    retry: {
      initialMs: e.ALERTER_WEBHOOK_RETRY_INITIAL_MS,
      maxMs: e.ALERTER_WEBHOOK_RETRY_MAX_MS,
      retryForMs: e.ALERTER_WEBHOOK_RETRY_FOR_MS,
    },
    webhookPurgeEveryMs: e.ALERTER_WEBHOOK_PURGE_EVERY_MS,
    usagePollMs: e.ALERTER_USAGE_POLL_MS,
    burnLookbackMs: e.ALERTER_BURN_LOOKBACK_MS,
    burnFlushMs: e.ALERTER_BURN_FLUSH_MS,
    streamReplicas: e.HOLDFAST_STREAM_REPLICAS,
  };
}

/** Parses the environment; throws an EnvError naming each bad variable. */
export function loadConfig(source: NodeJS.ProcessEnv = process.env) {
  return loadServiceConfig(AlerterEnv, source, (e) => ({
    opsPort: e.ALERTER_OPS_PORT,
    settings: settingsFromEnv(e),
  }));
}
export type AlerterConfig = ReturnType<typeof loadConfig>;

/**
 * The alerter's own NATS names, derived from the events names so a test (or a second
 * deployment on the same NATS) gets its own: `HOLDFAST_EVENTS` + `holdfast.events` give the
 * delivery queue `HOLDFAST_WEBHOOK_JOBS`, subjects `holdfast.webhooks.jobs.<webhook>`, the
 * delivery log `HOLDFAST_WEBHOOK_LOG` and the state bucket `HOLDFAST_ALERTER`.
 */
export interface AlerterNames {
  /** KV bucket: threshold state per window, suspensions, burn samples. */
  stateBucket: string;
  /** Stream of delivery jobs (limits retention: an ack deletes nothing, webhook/queue.ts). */
  webhookStream: string;
  webhookSubjectPrefix: string;
  /**
   * The work-queue stream of older versions (`HOLDFAST_WEBHOOKS`, `holdfast.webhooks.queue`):
   * its jobs are delivered, then it is deleted. A new stream because retention cannot change
   * in place, and new subjects because two streams cannot share one.
   */
  legacyWebhookStream: string;
  legacyWebhookSubjectPrefix: string;
  /** Delivery log and dead letters. */
  logStream: string;
  logSubjectPrefix: string;
  deadSubjectPrefix: string;
}

export function alerterNames(names: NatsNames): AlerterNames {
  const token = names.eventsStream.replace(/_EVENTS$/, '');
  const base = names.eventsPrefix.replace(/\.events$/, '');
  return {
    stateBucket: `${token}_ALERTER`,
    webhookStream: `${token}_WEBHOOK_JOBS`,
    webhookSubjectPrefix: `${base}.webhooks.jobs`,
    legacyWebhookStream: `${token}_WEBHOOKS`,
    legacyWebhookSubjectPrefix: `${base}.webhooks.queue`,
    logStream: `${token}_WEBHOOK_LOG`,
    logSubjectPrefix: `${base}.webhooks.log`,
    deadSubjectPrefix: `${base}.webhooks.dead`,
  };
}
