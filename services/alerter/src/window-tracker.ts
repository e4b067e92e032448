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
import type { ConfigSource, WindowPolicy } from './holdfast-config.js';
import type { AlerterMetrics } from './metrics.js';
import { casLoop, stateKeys, type StateStore } from './state-store.js';
import { crossed, crossingId, HARD_LEVEL, isAfter, Position, standing } from './thresholds.js';

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

/** The levels and limit a window's record last evaluated, and the event that showed them. */
const Known = z.object({ levels: z.array(z.number()), limit: z.number(), at: Position });

/**
 * A standing level fired at `at`: event crossings of that level between `since` (the record's
 * previous known state) and `at`, handled later, are what it already reported.
 */
const Standing = z.object({ level: z.number(), since: Position.nullable(), at: Position });

/** How many crossing ids a window remembers (redeliveries of an event publish nothing again). */
const RECENT_IDS = 64;

const WindowRecord = z.object({
  known: Known.nullable().default(null),
  standing: z.array(Standing).default([]),
  /** Ids of the crossings (and suspensions) recorded last, oldest first. */
  recent: z.array(z.string()).default([]),
  /** Window period (see burn-rate.ts) of the last exhaustion warning. */
  projectedPeriod: z.number().nullable().default(null),
  pending: z.array(PendingAction).default([]),
  /** A record from before crossings were per event (its fired levels): known, not standing. */
  fired: z.array(z.number()).optional(),
});
type WindowRecord = z.infer<typeof WindowRecord>;

const EMPTY: WindowRecord = {
  known: null,
  standing: [],
  recent: [],
  projectedPeriod: null,
  pending: [],
};

/** Carries out pending actions. */
export interface ActionSink {
  publish(event: Record<string, unknown>): Promise<void>;
  suspend(request: SuspendRequest): Promise<void>;
}

/** A window's state as one authority event showed it. */
export interface Snapshot {
  window: WindowState;
  /** The window's `used` at the event's time just before its change (`used` less its charge). */
  before: number;
  position: Position;
  cause: { eventId: string; time: string; org: string; windows: WindowState[] };
}

type Step<T> = Promise<{ done: true; result: T } | { done: false }>;

/** What one snapshot changes in a window's record; undefined when nothing. */
interface Decision {
  next: WindowRecord;
  fired: number[];
}

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

  /**
   * Fires the levels a snapshot's event crossed, and the standing ones it shows reached.
   * Returns no promise when the snapshot changes nothing and that is known at once (issue 14:
   * most snapshots): a window without a limit, or the common case decided from the state
   * mirror as the loop's first read would (nothing pending, nothing crossed, the levels known).
   */
  observe(s: Snapshot): Promise<void> | undefined {
    const w = s.window;
    if (w.limit === 0) return undefined;
    const key = stateKeys.window(w.tenant, w.budget);
    const policy = this.#config.policy(w);
    const watched = policy.levels;
    const crossings = crossed(s.before, w, watched);
    const known = this.#store.peek(key, WindowRecord, EMPTY)?.value;
    if (known?.pending.length === 0 && crossings.length === 0 && !relearns(known, s, watched)) {
      return undefined;
    }
    return this.#apply(key, s, watched, crossings, policy);
  }

  /** The compare-and-set loop of `observe`, from a read of the window's record. */
  async #apply(
    key: string,
    s: Snapshot,
    watched: readonly number[],
    crossings: number[],
    policy: WindowPolicy,
  ): Promise<void> {
    const w = s.window;
    let fresh = false;
    await casLoop(async (): Step<void> => {
      const { value: rec, revision } = await this.#store.read(key, WindowRecord, EMPTY, { fresh });
      fresh = true;
      if (rec.pending.length > 0) return this.#flushThenRetry(key, rec, revision);
      const d = decide(rec, s, watched, crossings, policy, this.#config.current.hash);
      if (!d) return { done: true, result: undefined };
      const rev = await this.#store.compareAndSet(key, d.next, revision);
      if (rev === undefined) return { done: false };
      if (d.fired.length > 0) {
        this.#logger.info(
          { level: w.tenant, budget: w.budget, fired: d.fired, cause: s.cause.eventId },
          'threshold crossed',
        );
      }
      for (const level of d.fired)
        this.#metrics.crossings.inc({ hard: String(level === HARD_LEVEL) });
      await this.#flush(key, d.next, rev);
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

/** The snapshot is newer than the record's known levels and shows others (or a new limit). */
function relearns(rec: WindowRecord, s: Snapshot, watched: readonly number[]): boolean {
  const k = rec.known;
  if (k === null) return true;
  if (!isAfter(s.position, k.at)) return false;
  return k.limit !== s.window.limit || !sameLevels(k.levels, watched);
}

function sameLevels(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((l, i) => l === b[i]);
}

/**
 * The pure step (thresholds.ts): the levels the event crossed, less those already recorded
 * (a redelivery) or reported by a standing level fired for a later event; the standing
 * levels when the snapshot is newer than the record's known state and shows levels (or a
 * lower limit) it did not know. Returns undefined when the record stays as it is.
 */
function decide(
  rec: WindowRecord,
  s: Snapshot,
  watched: readonly number[],
  crossings: readonly number[],
  policy: WindowPolicy,
  configHash: string,
): Decision | undefined {
  const w = s.window;
  let { known, standing: stood } = rec;
  const fire: Array<{ level: number; id: string }> = [];
  for (const level of crossings) {
    const covered = stood.some(
      (e) =>
        e.level === level &&
        isAfter(e.at, s.position) &&
        (e.since === null || isAfter(s.position, e.since)),
    );
    if (covered) continue;
    fire.push({ level, id: crossingId({ ...ids(w), level, cause: s.cause.eventId }) });
  }
  if (relearns(rec, s, watched)) {
    const was = rec.known;
    // Levels added, a lower limit: the levels the window may have reached without any event
    // crossing them. At the first look (not a record from before per-event crossings) only
    // the hard level: the events of a window seen for the first time come in any order, and
    // a soft level standing for a later one would cover the crossings of the earlier ones.
    const fresh =
      was === null
        ? rec.fired === undefined
          ? watched.filter((l) => l === HARD_LEVEL)
          : []
        : watched.filter(
            (l) => !was.levels.includes(l) || (w.limit < was.limit && s.before < l * was.limit),
          );
    const stand = standing(s.before, w, fresh);
    for (const level of stand) {
      fire.push({ level, id: crossingId({ ...ids(w), level, cause: `${configHash}/${w.limit}` }) });
    }
    stood = [
      ...stood.filter((e) => watched.includes(e.level) && !stand.includes(e.level)),
      ...stand.map((level) => ({ level, since: was?.at ?? null, at: s.position })),
    ];
    known = { levels: [...watched], limit: w.limit, at: s.position };
  }
  const due = fire.filter((f) => !rec.recent.includes(f.id)).sort((a, b) => a.level - b.level);
  if (due.length === 0 && known === rec.known) return undefined;
  const pending = due.map(({ level, id }): PendingAction => {
    if (level !== HARD_LEVEL) return { kind: 'publish', event: crossedEvent(s, level, id) };
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
  const { fired: _legacy, ...kept } = rec;
  return {
    next: {
      ...kept,
      known,
      standing: stood,
      recent: [...rec.recent, ...due.map((f) => f.id)].slice(-RECENT_IDS),
      pending,
    },
    fired: due.map((f) => f.level),
  };
}

function ids(w: WindowState): { tenant: string; budget: string } {
  return { tenant: w.tenant, budget: w.budget };
}

function crossedEvent(s: Snapshot, threshold: number, id: string): ThresholdCrossed {
  const w = s.window;
  return {
    id,
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
