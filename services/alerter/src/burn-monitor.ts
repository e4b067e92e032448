import { randomUUID } from 'node:crypto';
import {
  CURRENT_SCHEMA_VERSION,
  type BudgetExhaustionProjected,
  type HoldfastEvent,
} from '@holdfast/events';
import { errorMessage, type Logger } from '@holdfast/runtime';
import {
  burnBucketMs,
  burnPerSecond,
  BurnRecord,
  mergeSamples,
  projectExhaustion,
  windowPeriod,
} from './burn-rate.js';
import type { ConfigSource } from './holdfast-config.js';
import type { AlerterMetrics } from './metrics.js';
import { casLoop, stateKeys, type StateStore, type Versioned } from './state-store.js';
import { chargedBy, isAfter } from './thresholds.js';
import type { Snapshot, WindowTracker } from './window-tracker.js';

interface Pending {
  samples: Map<number, number>;
}

/**
 * Collects burn samples from settled usage, merges them into the shared store `flushMs` after
 * they came (one compare-and-set per touched window per replica, not one per event), and
 * fires `budget.exhaustion_projected` through the tracker's once-per-period guard.
 *
 * Samples are held in memory until the next flush and the events are acked before it: a crash
 * loses at most one flush interval of samples, which only delays a warning. Writing the
 * store on every event would put a hot key in front of every settle of a busy tenant.
 */
export class BurnMonitor {
  readonly #store: StateStore;
  readonly #tracker: WindowTracker;
  readonly #config: ConfigSource;
  readonly #logger: Logger;
  readonly #metrics: AlerterMetrics;
  readonly #lookbackMs: number;
  readonly #flushMs: number;
  readonly #now: () => number;
  #pending = new Map<string, Pending>();
  readonly #latest = new Map<string, Snapshot>();
  /** Each burn record as this replica last wrote it, at the revision the write made. */
  readonly #written = new Map<string, Versioned<BurnRecord>>();
  #timer: NodeJS.Timeout | undefined;
  #started = false;
  #flushing: Promise<void> = Promise.resolve();

  constructor(opts: {
    store: StateStore;
    tracker: WindowTracker;
    config: ConfigSource;
    logger: Logger;
    metrics: AlerterMetrics;
    lookbackMs: number;
    flushMs: number;
    now?: () => number;
  }) {
    this.#store = opts.store;
    this.#tracker = opts.tracker;
    this.#config = opts.config;
    this.#logger = opts.logger;
    this.#metrics = opts.metrics;
    this.#lookbackMs = opts.lookbackMs;
    this.#flushMs = opts.flushMs;
    this.#now = opts.now ?? Date.now;
  }

  start(): void {
    this.#started = true;
    if (this.#pending.size > 0) this.#schedule();
  }

  async stop(): Promise<void> {
    this.#started = false;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#flushing;
    await this.flush();
  }

  /**
   * A flush `flushMs` after the first sample that waits, then again while some wait (a failed
   * merge keeps its samples): no timer runs while nothing was settled (issue 14).
   */
  #schedule(): void {
    if (!this.#started || this.#timer) return;
    this.#timer = setTimeout(() => {
      this.#flushing = this.#flushing
        .then(() => this.flush())
        .finally(() => {
          this.#timer = undefined;
          if (this.#pending.size > 0) this.#schedule();
        });
    }, this.#flushMs);
  }

  /** Takes the charged amounts and window states of one authority event. */
  add(event: HoldfastEvent, snapshots: Snapshot[]): void {
    for (const s of snapshots) {
      const key = stateKeys.window(s.window.tenant, s.window.budget);
      const latest = this.#latest.get(key);
      if (!latest || isAfter(s.position, latest.position)) this.#latest.set(key, s);
    }
    if (!('chargedTokens' in event)) return;
    const bucketMs = burnBucketMs(this.#lookbackMs);
    const bucket = Math.floor(Date.parse(event.time) / bucketMs) * bucketMs;
    for (const s of snapshots) {
      const amount = chargedBy(event, s.window);
      if (amount === 0) continue;
      const key = stateKeys.burn(s.window.tenant, s.window.budget);
      const p = this.#pending.get(key) ?? { samples: new Map<number, number>() };
      p.samples.set(bucket, (p.samples.get(bucket) ?? 0) + amount);
      this.#pending.set(key, p);
    }
    if (this.#pending.size > 0) this.#schedule();
  }

  /** Merges the samples taken since the last flush and checks those windows' projections. */
  async flush(): Promise<void> {
    const batch = this.#pending;
    this.#pending = new Map();
    for (const [burnKey, p] of batch) {
      const windowKey = burnKey.replace(/^burn\./, 'win.');
      try {
        const rec = await this.#merge(burnKey, p.samples);
        this.#metrics.burnFlushes.inc({ stage: 'merged' });
        const latest = this.#latest.get(windowKey);
        try {
          if (latest) await this.#check(latest, rec);
        } finally {
          this.#metrics.burnFlushes.inc({ stage: 'checked' });
        }
      } catch (err) {
        this.#logger.warn({ err: errorMessage(err), key: burnKey }, 'burn flush failed; retrying');
        const back = this.#pending.get(burnKey) ?? { samples: new Map<number, number>() };
        for (const [b, a] of p.samples) back.samples.set(b, (back.samples.get(b) ?? 0) + a);
        this.#pending.set(burnKey, back);
      }
    }
  }

  /**
   * Adds `samples` to the shared record by compare-and-set, from what this replica wrote last
   * (one KV request, the write: this replica is usually the record's only writer between two
   * flushes), else from a read; a lost race reads the record again (another replica wrote).
   */
  async #merge(key: string, samples: Map<number, number>): Promise<BurnRecord> {
    let from = this.#written.get(key);
    this.#written.delete(key);
    return casLoop<BurnRecord>(
      async (): Promise<{ done: true; result: BurnRecord } | { done: false }> => {
        const { value, revision } =
          from ?? (await this.#store.read(key, BurnRecord, { buckets: [] }));
        from = undefined;
        const next = mergeSamples(value, samples, this.#now(), this.#lookbackMs);
        const rev = await this.#store.compareAndSet(key, next, revision);
        if (rev === undefined) return { done: false };
        this.#written.set(key, { value: next, revision: rev });
        return { done: true, result: next };
      },
      `burn ${key}`,
    );
  }

  async #check(s: Snapshot, rec: BurnRecord): Promise<void> {
    const w = s.window;
    const now = this.#now();
    const burn = burnPerSecond(rec, now, this.#lookbackMs);
    const { calendar } = this.#config.policy(w);
    const horizonSeconds = this.#config.current.raw.alerts.exhaustionHorizonSeconds;
    const at = projectExhaustion({
      limit: w.limit,
      used: w.used,
      window: w.window,
      calendar,
      burnPerSecond: burn,
      nowMs: now,
      horizonSeconds,
    });
    if (at === undefined) return;
    const period = windowPeriod(w.window, now, calendar);
    const fired = await this.#tracker.projectOnce(w, period, (): BudgetExhaustionProjected => ({
      id: randomUUID(),
      schemaVersion: CURRENT_SCHEMA_VERSION,
      time: new Date(now).toISOString(),
      tenant: w.tenant,
      org: s.cause.org,
      type: 'budget.exhaustion_projected',
      level: w.tenant,
      budget: w.budget,
      window: w.window,
      unit: w.unit,
      burnPerSecond: burn,
      projectedExhaustionAt: new Date(at).toISOString(),
      horizonSeconds,
      limit: w.limit,
      used: w.used,
      held: w.held,
      windows: s.cause.windows,
    }));
    if (fired) {
      this.#logger.info(
        { level: w.tenant, budget: w.budget, burn, at: new Date(at).toISOString() },
        'exhaustion projected',
      );
    }
  }
}
