import { randomUUID } from 'node:crypto';
import {
  CURRENT_SCHEMA_VERSION,
  utilisation,
  type BudgetExhaustionProjected,
  type SuspendRequest,
  type ThresholdCrossed,
  type WindowState,
} from '@holdfast/events';
import type { Logger } from '@holdfast/runtime';
import { z } from 'zod';
import type { ConfigSource } from './holdfast-config.js';
import type { AlerterMetrics } from './metrics.js';
import { casLoop, stateKeys, type StateStore } from './state-store.js';
import { evaluate, HARD_LEVEL, isAfter, Position } from './thresholds.js';

/**
 * What a transition must cause outside the store. Written into the window's record in the
 * same compare-and-set as the transition (an outbox), carried out, then cleared. If the
 * process dies in between, the next replica that touches the window carries them out again:
 * publishing is idempotent (the event id is fixed in the record and is the Nats-Msg-Id) and
 * so is suspending (the authority answers `changed: false`).
 */
const PendingAction = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('publish'), event: z.record(z.string(), z.unknown()) }),
  z.object({
    kind: z.literal('suspend'),
    request: z.object({
      tenant: z.string(),
      reason: z.string(),
      by: z.literal('alerter'),
      budget: z.string(),
      graceMs: z.number(),
    }),
  }),
]);
type PendingAction = z.infer<typeof PendingAction>;

const WindowRecord = z.object({
  /** Position of the snapshot that caused the last applied transition. */
  at: Position.nullable(),
  /** Levels fired and not yet re-armed (soft thresholds, and 1 for the hard limit). */
  fired: z.array(z.number()),
  /** Window period (see burn-rate.ts) of the last exhaustion warning. */
  projectedPeriod: z.number().nullable(),
  pending: z.array(PendingAction),
});
type WindowRecord = z.infer<typeof WindowRecord>;

const EMPTY: WindowRecord = { at: null, fired: [], projectedPeriod: null, pending: [] };

/** Carries out pending actions. */
export interface ActionSink {
  publish(event: Record<string, unknown>): Promise<void>;
  suspend(request: SuspendRequest): Promise<void>;
}

/** A window's state as one authority event (or usage read) showed it. */
export interface Snapshot {
  window: WindowState;
  position: Position;
  cause: { eventId: string; time: string; org: string; windows: WindowState[] };
}

type Step<T> = Promise<{ done: true; result: T } | { done: false }>;

/** Applies window snapshots to the shared threshold state, exactly once per crossing. */
export class WindowTracker {
  readonly #store: StateStore;
  readonly #sink: ActionSink;
  readonly #config: ConfigSource;
  readonly #logger: Logger;
  readonly #metrics: AlerterMetrics;

  constructor(opts: {
    store: StateStore;
    sink: ActionSink;
    config: ConfigSource;
    logger: Logger;
    metrics: AlerterMetrics;
  }) {
    this.#store = opts.store;
    this.#sink = opts.sink;
    this.#config = opts.config;
    this.#logger = opts.logger;
    this.#metrics = opts.metrics;
  }

  /** Fires the thresholds a snapshot reaches and re-arms the ones it falls below. */
  async observe(s: Snapshot): Promise<void> {
    const w = s.window;
    if (w.limit === 0) return;
    const key = stateKeys.window(w.tenant, w.budget);
    const policy = this.#config.policy(w);
    // The common case, decided from the local copy as the loop's first read would, without
    // its round of promises (issue 14): nothing pending, and a stale snapshot or no change.
    const known = this.#store.peek(key, WindowRecord, EMPTY)?.value;
    if (
      known?.pending.length === 0 &&
      (!isAfter(s.position, known.at) || evaluate(known.fired, w, policy) === undefined)
    ) {
      return;
    }
    let fresh = false;
    await casLoop(async (): Step<void> => {
      const { value: rec, revision } = await this.#store.read(key, WindowRecord, EMPTY, { fresh });
      fresh = true;
      if (rec.pending.length > 0) return this.#flushThenRetry(key, rec, revision);
      if (!isAfter(s.position, rec.at)) return { done: true, result: undefined };
      const t = evaluate(rec.fired, w, policy);
      if (!t) return { done: true, result: undefined };
      const pending = t.fired.map((level): PendingAction => {
        if (level !== HARD_LEVEL) return { kind: 'publish', event: crossedEvent(s, level) };
        const reason = `budget ${w.budget} of ${w.tenant} reached its hard limit (${w.used} of ${w.limit} ${w.unit === 'usd' ? 'micro-USD' : 'tokens'})`;
        return {
          kind: 'suspend',
          request: {
            tenant: w.tenant,
            reason,
            by: 'alerter',
            budget: w.budget,
            graceMs: policy.graceMs,
          },
        };
      });
      const next: WindowRecord = { ...rec, at: s.position, fired: t.next, pending };
      const rev = await this.#store.compareAndSet(key, next, revision);
      if (rev === undefined) return { done: false };
      this.#logger.info(
        {
          level: w.tenant,
          budget: w.budget,
          fired: t.fired,
          rearmed: t.rearmed,
          cause: s.cause.eventId,
        },
        'threshold state changed',
      );
      for (const level of t.fired)
        this.#metrics.crossings.inc({ hard: String(level === HARD_LEVEL) });
      await this.#flush(key, next, rev);
      return { done: true, result: undefined };
    }, `window ${key}`);
  }

  /**
   * Records an exhaustion warning for `period` unless one was already recorded for it (or a
   * later period), then publishes it. Returns whether this call fired it.
   */
  async projectOnce(
    w: WindowState,
    period: number,
    build: () => BudgetExhaustionProjected,
  ): Promise<boolean> {
    const key = stateKeys.window(w.tenant, w.budget);
    let fresh = false;
    return casLoop(async (): Step<boolean> => {
      const { value: rec, revision } = await this.#store.read(key, WindowRecord, EMPTY, { fresh });
      fresh = true;
      if (rec.pending.length > 0) return this.#flushThenRetry(key, rec, revision);
      if (rec.projectedPeriod !== null && rec.projectedPeriod >= period) {
        return { done: true, result: false };
      }
      const event = build();
      const next: WindowRecord = {
        ...rec,
        projectedPeriod: period,
        pending: [{ kind: 'publish', event }],
      };
      const rev = await this.#store.compareAndSet(key, next, revision);
      if (rev === undefined) return { done: false };
      this.#metrics.projections.inc();
      await this.#flush(key, next, rev);
      return { done: true, result: true };
    }, `projection ${key}`);
  }

  async #flushThenRetry(key: string, rec: WindowRecord, revision: number): Step<never> {
    await this.#flush(key, rec, revision);
    return { done: false };
  }

  /** Carries out the pending actions in order, then clears them (a lost race is harmless). */
  async #flush(key: string, rec: WindowRecord, revision: number): Promise<void> {
    for (const action of rec.pending) {
      if (action.kind === 'publish') await this.#sink.publish(action.event);
      else await this.#sink.suspend(action.request);
    }
    await this.#store.compareAndSet(key, { ...rec, pending: [] }, revision);
  }
}

function crossedEvent(s: Snapshot, threshold: number): ThresholdCrossed {
  const w = s.window;
  return {
    id: randomUUID(),
    schemaVersion: CURRENT_SCHEMA_VERSION,
    // The crossing happened when the authority changed the window, not when we noticed.
    time: s.cause.time,
    tenant: w.tenant,
    org: s.cause.org,
    type: 'threshold.crossed',
    level: w.tenant,
    budget: w.budget,
    window: w.window,
    unit: w.unit,
    threshold,
    utilisation: utilisation(w),
    limit: w.limit,
    used: w.used,
    held: w.held,
    causeEventId: s.cause.eventId,
    windows: s.cause.windows,
  };
}
