import {
  DurableConsumer,
  Err,
  errorMessage,
  Ok,
  type DeadLetters,
  type Logger,
  type Result,
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
import { DeliveryJob } from './queue.js';
import { nextStep } from './retry.js';
import { signWebhook, webhookBody } from './sign.js';

const DELIVERER_CONSUMER = 'deliverer';
/**
 * Jobs one webhook may have parked on a replica; past it a job is handed back until a turn of
 * that webhook could have passed (the attempt timeout).
 */
const PARKED_PER_HOOK = 1_000;
/** Between two pulls of jobs while they keep coming (none after a full pull, none after a quiet spell). */
const PULL_EVERY_MS = 20;
/** How often a parked job is marked in progress (inside the consumer's ack wait, 30 s and more). */
const KEEPALIVE_MS = 10_000;

/** A job waiting for a turn of its webhook. */
interface Parked {
  m: JsMsg;
  attempt: () => Promise<void>;
}

/** What the delivery log records of an attempt (its status, error and duration fields). */
interface AttemptFields {
  status: number | null;
  error: string | null;
  durationMs: number;
}

/**
 * Why a job was not delivered: the receiver answered a non-2xx (`status` set), could not be
 * reached, or was never called (its secret is not set). A plain object: it goes into the log.
 */
interface AttemptError extends AttemptFields {
  code: 'webhook_refused' | 'webhook_unreachable' | 'not_attempted';
}

type AttemptResult = Result<AttemptFields, AttemptError>;

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
 */
export class DeliveryWorker {
  readonly #o: DeliveryWorkerOptions;
  readonly #logger: Logger;
  #loop: DurableConsumer | undefined;
  /** Attempts running on this replica, by webhook id. */
  readonly #running = new Map<string, number>();
  /** Jobs waiting for a turn of their webhook, in order, by webhook id. */
  readonly #parked = new Map<string, Parked[]>();
  /** Attempts of parked jobs, started outside the consumer's slots (awaited on stop). */
  readonly #detached = new Set<Promise<void>>();
  #keepAlive: NodeJS.Timeout | undefined;
  /** Set by stop(): parked jobs are handed back, not started. */
  #stopping = false;

  constructor(opts: DeliveryWorkerOptions) {
    this.#o = opts;
    this.#logger = opts.logger.child({ component: 'webhooks' });
  }

  get consuming(): boolean {
    return this.#loop?.consuming ?? false;
  }

  async start(): Promise<void> {
    const { webhookConcurrency, webhookTimeoutMs } = this.#o.settings;
    this.#loop = new DurableConsumer({
      js: this.#o.js,
      jsm: this.#o.jsm,
      stream: this.#o.names.webhookStream,
      durable: {
        durable_name: DELIVERER_CONSUMER,
        // A work queue delivers everything it holds.
        deliver_policy: DeliverPolicy.All,
        // Longer than one attempt, so a slow receiver is not sent the same job twice at once.
        ack_wait: nanos(webhookTimeoutMs + 30_000),
        max_ack_pending: 10_000,
      },
      pullSize: webhookConcurrency,
      concurrency: webhookConcurrency,
      // Pulled in bursts: after stop() a job the last pull still brings is handed back at
      // once, where consume() left it for the ack wait (40 s by default).
      bursts: { nc: this.#o.nc, everyMs: PULL_EVERY_MS },
      onMessage: (m) => this.#take(m),
      restart: RESTART,
      redeliver: RESTART,
      maxMissedHeartbeats: 3,
      logger: this.#logger,
    });
    // Parked jobs stay this replica's: told to JetStream well inside their ack wait.
    this.#keepAlive = setInterval(() => {
      for (const parked of this.#parked.values()) for (const p of parked) p.m.working();
    }, KEEPALIVE_MS);
    this.#keepAlive.unref();
    await this.#loop.start();
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    clearInterval(this.#keepAlive);
    await this.#loop?.stop();
    // Parked jobs go back to the queue at once, for whichever replica pulls next.
    for (const parked of this.#parked.values()) for (const p of parked) p.m.nak();
    this.#parked.clear();
    this.#o.metrics.webhookJobsWaiting.reset();
    await Promise.all(this.#detached);
  }

  /**
   * Takes a job: attempts it now (the returned promise is the consumer's slot), unless its
   * webhook already has `webhookConcurrencyPerHook` attempts running on this replica. Then the
   * job is parked until one of them ends and the consumer's slot goes to other webhooks' jobs:
   * a receiver that hangs until the timeout holds at most its own share of the deliverer, and
   * every other webhook's alerts still go out. Past PARKED_PER_HOOK parked jobs, a job is
   * handed back for the attempt timeout (its next delivery counts as an attempt).
   */
  #take(m: JsMsg): Promise<void> | undefined {
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
    const attempt = () => this.#attempt(m, job, base, hook.url, secret);
    if ((this.#running.get(hook.id) ?? 0) < this.#perHook) return this.#run(hook.id, attempt);
    let parked = this.#parked.get(hook.id);
    if (!parked) this.#parked.set(hook.id, (parked = []));
    if (parked.length >= PARKED_PER_HOOK) {
      m.nak(this.#o.settings.webhookTimeoutMs);
      return undefined;
    }
    parked.push({ m, attempt });
    this.#o.metrics.webhookJobsWaiting.set({ webhook: hook.id }, parked.length);
    return undefined;
  }

  /** The most attempts one webhook may have running at once on this replica. */
  get #perHook(): number {
    const { webhookConcurrency, webhookConcurrencyPerHook } = this.#o.settings;
    return Math.max(1, Math.min(webhookConcurrency, webhookConcurrencyPerHook));
  }

  /** Runs an attempt in one of its webhook's turns; when it ends, that webhook's next parked job. */
  async #run(hookId: string, attempt: () => Promise<void>): Promise<void> {
    this.#running.set(hookId, (this.#running.get(hookId) ?? 0) + 1);
    try {
      await attempt();
    } finally {
      const left = (this.#running.get(hookId) ?? 1) - 1;
      if (left > 0) this.#running.set(hookId, left);
      else this.#running.delete(hookId);
      const parked = this.#parked.get(hookId);
      const next = this.#stopping ? undefined : parked?.shift();
      if (next) this.#o.metrics.webhookJobsWaiting.set({ webhook: hookId }, parked?.length ?? 0);
      if (parked?.length === 0) this.#parked.delete(hookId);
      if (next) {
        const detached: Promise<void> = this.#run(hookId, next.attempt)
          .catch((err: unknown) => {
            this.#logger.error({ err: errorMessage(err) }, 'parked delivery failed (a bug)');
            next.m.nak(this.#o.settings.retry.initialMs);
          })
          .finally(() => this.#detached.delete(detached));
        this.#detached.add(detached);
      }
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
    m.nak(step.delayMs);
  }

  async #post(url: string, secret: string, job: DeliveryJob): Promise<AttemptResult> {
    const started = performance.now();
    try {
      const req = signWebhook({ secret, id: job.event.id, body: webhookBody(job.event) });
      const res = await fetch(url, {
        method: 'POST',
        headers: req.headers,
        body: req.body,
        redirect: 'manual',
        signal: AbortSignal.timeout(this.#o.settings.webhookTimeoutMs),
      });
      await res.body?.cancel();
      const durationMs = performance.now() - started;
      if (res.status >= 200 && res.status < 300) {
        return Ok({ status: res.status, error: null, durationMs });
      }
      return Err({
        code: 'webhook_refused',
        status: res.status,
        error: `HTTP ${res.status}`,
        durationMs,
      });
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause?.code;
      return Err({
        code: 'webhook_unreachable',
        status: null,
        error: cause ? `${errorMessage(err)} (${cause})` : errorMessage(err),
        durationMs: performance.now() - started,
      });
    }
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
      m.nak(this.#o.settings.retry.initialMs);
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
