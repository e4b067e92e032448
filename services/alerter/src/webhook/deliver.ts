import {
  DurableConsumer,
  errorMessage,
  every,
  nakConfirmed,
  type DeadLetters,
  type Logger,
  type Periodic,
} from '@holdfast/runtime';
import {
  DeliverPolicy,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import { nanos, type NatsConnection } from '@nats-io/transport-node';
import type { AlerterNames, AlerterSettings } from '../env.js';
import { RESTART } from '../consumer.js';
import type { ConfigSource } from '../holdfast-config.js';
import type { AlerterMetrics } from '../metrics.js';
import type { DeliveryLog, DeliveryLogRecord } from './log.js';
import { consumerOf, WebhookConsumers, type JobSource } from './consumers.js';
import { DeliveryJob, webhookAckWaitMs } from './queue.js';
import { AckedJobsPurger } from './purge.js';
import { nextStep } from './retry.js';
import { postWebhook, type AttemptError, type AttemptFields, type AttemptResult } from './post.js';
import { signWebhook, webhookBody } from './sign.js';

/**
 * The one consumer all webhooks' jobs once shared on the older versions' work queue, deleted at
 * start: a failed job stays unacked for its retry period, so one webhook failing every job of a
 * busy event type filled its 10,000 unacked and held back every other webhook's alerts
 * (webhook.backlog.int.test.ts).
 */
const SHARED_CONSUMER = 'deliverer';
/** Between two pulls of jobs while they keep coming (none after a full pull, none after a quiet spell). */
const PULL_EVERY_MS = 20;
/** How often the consumers are matched to the config and the queue (a new webhook, jobs of a removed one). */
const SYNC_EVERY_MS = 2_000;

/** The log's fields of an attempt, either way it went (without the error's code). */
function fields(r: AttemptResult | AttemptError): AttemptFields {
  const { status, error, durationMs } = 'ok' in r ? (r.ok ? r.value : r.error) : r;
  return { status, error, durationMs };
}

export interface DeliveryWorkerOptions {
  /** The connection `js` and `jsm` were made from (the pulls are requests on it). */
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  names: AlerterNames;
  config: ConfigSource;
  settings: AlerterSettings;
  logger: Logger;
  metrics: AlerterMetrics;
  log: DeliveryLog;
  /** Where a job that does not parse goes (source `alerter-webhooks`). */
  deadLetters: DeadLetters;
  secrets: NodeJS.ProcessEnv;
}

/**
 * Delivers queued webhook jobs: POST the signed body, ack on 2xx; otherwise nak with the next
 * backoff delay (JetStream redelivers it then, to whichever replica pulls first), and after
 * `retryForMs` write a dead-letter record and ack. Every attempt is logged.
 *
 * Each webhook has a durable consumer of its own, filtered on its jobs' subject: its failed
 * jobs, unacked for their whole retry period, fill only its own `max_ack_pending`, and a
 * receiver that hangs holds only its own `webhookConcurrencyPerHook` attempts; every other
 * webhook's alerts go out. A replica's attempts in all are bounded by `webhookConcurrency`.
 * Consumers are started for the config's webhooks and for any webhook with jobs still pending
 * (one removed from the config: its jobs are dropped and recorded), on the queue and on the
 * work queue of older versions until it is drained (consumers.ts), at start, on every config
 * change (`sync`), and every SYNC_EVERY_MS.
 */
export class DeliveryWorker {
  readonly #o: DeliveryWorkerOptions;
  readonly #logger: Logger;
  /** Each webhook's consumer loop on each stream of jobs. */
  readonly #consumers: WebhookConsumers;
  /** Purges the jobs each webhook's consumer acked. */
  readonly #purger: AckedJobsPurger;
  /** Attempts running on this replica, and those waiting for one of its slots. */
  #running = 0;
  /** Woken with true when handed a slot, false when the replica stops. */
  readonly #waiting: Array<(slot: boolean) => void> = [];
  #syncTimer: Periodic | undefined;
  #stopping = false;

  constructor(opts: DeliveryWorkerOptions) {
    this.#o = opts;
    this.#logger = opts.logger.child({ component: 'webhooks' });
    this.#consumers = new WebhookConsumers({
      ...opts,
      logger: this.#logger,
      loop: (source, hookId) => this.#consumer(source, hookId),
    });
    this.#purger = new AckedJobsPurger({
      ...opts,
      logger: this.#logger,
      stream: opts.names.webhookStream,
      everyMs: opts.settings.webhookPurgeEveryMs,
    });
  }

  get consuming(): boolean {
    return this.#consumers.consuming;
  }

  async start(): Promise<void> {
    // The consumer every webhook once shared: a work queue takes no consumer overlapping
    // another's subjects. Stop every replica of an older version before starting this one.
    await this.#o.jsm.consumers
      .delete(this.#o.names.legacyWebhookStream, SHARED_CONSUMER)
      .catch(() => undefined);
    await this.sync();
    this.#syncTimer = every(SYNC_EVERY_MS, () => this.sync(), {
      logger: this.#logger,
      failed: 'webhook consumers not synced',
    });
    this.#purger.start();
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    // The timer stops now; its sync under way ends before the consumers stop (below).
    const synced = this.#syncTimer?.stop();
    await this.#purger.stop();
    // Attempts waiting for a slot are not started: their jobs are handed back at once.
    for (const wake of this.#waiting.splice(0)) wake(false);
    // Each loop hands back at once what it pulled and has not started, and waits for its
    // attempts in flight.
    await this.#consumers.stop();
    await synced;
    this.#o.metrics.webhookJobsWaiting.reset();
  }

  /**
   * Starts a consumer for each webhook of the config and each webhook with jobs still pending
   * that has none on this replica, and retires those with nothing left. One sync at a time.
   */
  sync(): Promise<void> {
    return this.#consumers.sync();
  }

  /** The consumer loop of one webhook's jobs. */
  #consumer(source: JobSource, hookId: string): DurableConsumer {
    const perHook = this.#perHook;
    return new DurableConsumer({
      nc: this.#o.nc,
      js: this.#o.js,
      jsm: this.#o.jsm,
      stream: source.stream,
      durable: {
        durable_name: consumerOf(hookId),
        filter_subject: `${source.prefix}.${hookId}`,
        // Everything stored: a webhook's acked jobs are purged when its consumer goes
        // (consumers.ts), so a new consumer finds only jobs still to deliver.
        deliver_policy: DeliverPolicy.All,
        ack_wait: nanos(this.#ackWaitMs),
        max_ack_pending: 10_000,
      },
      pullSize: perHook,
      concurrency: perHook,
      // Pulled in bursts: a job at a time per slot, one pull out.
      bursts: { everyMs: PULL_EVERY_MS },
      onMessage: (m) => this.#take(hookId, m),
      restart: RESTART,
      redeliver: RESTART,
      maxMissedHeartbeats: 3,
      logger: this.#logger,
    });
  }

  /**
   * Takes a job of `hookId`'s consumer (which runs at most `webhookConcurrencyPerHook` at once):
   * attempts it in one of the replica's `webhookConcurrency` slots. The gauge shows the jobs
   * of the webhook queued behind it.
   */
  #take(hookId: string, m: JsMsg): Promise<void> | undefined {
    this.#o.metrics.webhookJobsWaiting.set({ webhook: hookId }, m.info.pending);
    let raw: unknown;
    try {
      raw = m.json();
    } catch {
      raw = undefined;
    }
    const parsed = DeliveryJob.safeParse(raw);
    if (!parsed.success) {
      // Never deliverable: parked with its bytes, and no delivery is attempted.
      const reason = `malformed delivery job: ${parsed.error.issues[0]?.message ?? 'not JSON'}`;
      return this.#malformed(m, reason);
    }
    const job = parsed.data;
    const base = {
      deliveryId: job.event.id,
      webhookId: job.webhookId,
      eventType: job.event.type,
      tenant: job.event.tenant,
      attempt: m.info.deliveryCount,
    };
    const hook = this.#o.config.current.raw.webhooks.find((w) => w.id === job.webhookId);
    if (!hook) return this.#dropped(m, job, base);
    const secret = this.#o.secrets[hook.secretEnv];
    if (!secret) {
      return this.#deadLetter(m, job, base, `secret ${hook.secretEnv} is not set`, notAttempted());
    }
    return this.#inSlot(m, () => this.#attempt(m, job, base, hook.url, secret));
  }

  /** A job's ack wait (webhookAckWaitMs). */
  get #ackWaitMs(): number {
    return webhookAckWaitMs(this.#o.settings);
  }

  /** The most attempts one webhook may have running at once on this replica. */
  get #perHook(): number {
    const { webhookConcurrency, webhookConcurrencyPerHook } = this.#o.settings;
    return Math.max(1, Math.min(webhookConcurrency, webhookConcurrencyPerHook));
  }

  /**
   * Runs `attempt` in one of the replica's `webhookConcurrency` slots, waiting for one; after
   * stop() it is not started and `m` is handed back at once (another replica takes it).
   */
  async #inSlot(m: JsMsg, attempt: () => Promise<void>): Promise<void> {
    if (this.#stopping) {
      m.nak();
      return;
    }
    // A slot that frees goes to the first waiting attempt as it is.
    if (this.#running >= this.#o.settings.webhookConcurrency) {
      const slot = await new Promise<boolean>((resolve) => this.#waiting.push(resolve));
      if (!slot) {
        m.nak();
        return;
      }
    } else this.#running++;
    try {
      await attempt();
    } finally {
      const next = this.#waiting.shift();
      if (next) next(true);
      else this.#running--;
    }
  }

  async #malformed(m: JsMsg, reason: string): Promise<void> {
    if (await this.#o.deadLetters.term(m, reason)) {
      this.#o.metrics.deliveries.inc({ outcome: 'dropped' });
    }
  }

  async #dropped(m: JsMsg, job: DeliveryJob, base: Omit<Attempt, 'outcome'>): Promise<void> {
    await this.#record(job, { ...base, outcome: 'dropped', error: 'webhook removed from config' });
    m.ack();
  }

  /** POSTs the job to its receiver: ack on 2xx, else nak with the next delay, or dead-letter. */
  async #attempt(
    m: JsMsg,
    job: DeliveryJob,
    base: Omit<Attempt, 'outcome'>,
    url: string,
    secret: string,
  ): Promise<void> {
    const result = await this.#post(url, secret, job);
    if (result.ok) {
      const latencyMs = Date.now() - Date.parse(job.event.time);
      this.#o.metrics.deliveryLatency.observe(latencyMs / 1_000);
      await this.#record(job, { ...base, outcome: 'delivered', ...fields(result) });
      m.ack();
      return;
    }
    const step = nextStep({
      attempt: base.attempt,
      enqueuedAtMs: Date.parse(job.enqueuedAt),
      nowMs: Date.now(),
      policy: this.#o.settings.retry,
    });
    if (step.kind === 'dead_letter') {
      await this.#deadLetter(m, job, base, 'retries exhausted', result.error);
      return;
    }
    await this.#record(job, {
      ...base,
      outcome: 'failed',
      ...fields(result),
      nextAttemptAt: new Date(Date.now() + step.delayMs).toISOString(),
    });
    void nakConfirmed(m, step.delayMs, this.#ackWaitMs);
  }

  #post(url: string, secret: string, job: DeliveryJob): Promise<AttemptResult> {
    const sign = () => signWebhook({ secret, id: job.event.id, body: webhookBody(job.event) });
    return postWebhook(url, sign, this.#o.settings.webhookTimeoutMs);
  }

  async #deadLetter(
    m: JsMsg,
    job: DeliveryJob,
    base: Omit<Attempt, 'outcome'>,
    reason: string,
    failure: AttemptError,
  ): Promise<void> {
    const result = fields(failure);
    try {
      await this.#o.log.deadLetter(
        { ...logEntry({ ...base, outcome: 'dead_lettered', ...result }, job), reason, job },
        m,
      );
    } catch (err) {
      // Keep the job until its dead-letter record is written.
      this.#logger.error({ err: errorMessage(err) }, 'dead-letter write failed');
      void nakConfirmed(m, this.#o.settings.retry.initialMs, this.#ackWaitMs);
      return;
    }
    this.#o.metrics.deliveries.inc({ outcome: 'dead_lettered' });
    this.#logger.error({ ...base, reason, error: result.error }, 'webhook dead-lettered');
    m.ack();
  }

  /** Counts and logs one attempt; a log write that fails never holds a delivery back. */
  async #record(job: DeliveryJob, r: Attempt): Promise<void> {
    this.#o.metrics.deliveries.inc({ outcome: r.outcome });
    const entry = logEntry(r, job);
    const level = r.outcome === 'delivered' ? 'info' : 'warn';
    this.#logger[level]({ ...entry }, `webhook ${r.outcome}`);
    try {
      await this.#o.log.attempt(entry);
    } catch (err) {
      this.#logger.warn({ err: errorMessage(err) }, 'delivery log write failed');
    }
  }
}

type Attempt = Partial<DeliveryLogRecord> &
  Pick<
    DeliveryLogRecord,
    'deliveryId' | 'webhookId' | 'eventType' | 'tenant' | 'attempt' | 'outcome'
  >;

function logEntry(r: Attempt, job: DeliveryJob): DeliveryLogRecord {
  const now = Date.now();
  return {
    time: new Date(now).toISOString(),
    status: null,
    error: null,
    durationMs: 0,
    nextAttemptAt: null,
    ...r,
    latencyMs: now - Date.parse(job.event.time),
  };
}

function notAttempted(): AttemptError {
  return { code: 'not_attempted', status: null, error: null, durationMs: 0 };
}
