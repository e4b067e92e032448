import { WINDOW_GRANULARITY, windowBounds, type BudgetWindow } from '@holdfast/events';
import { z } from 'zod';

/**
 * Burn rate and time-to-exhaustion, pure functions.
 *
 * Burn is what settled usage added to a window (the events' `charged*` amounts) over a
 * trailing lookback, per second. Samples are kept in `BURN_BUCKETS` buckets of lookback/10
 * so the shared record stays small; every replica adds its own samples to it.
 */
const BURN_BUCKETS = 10;

/** `[bucketStartMs, amount]` pairs, oldest first. */
export const BurnRecord = z.object({ buckets: z.array(z.tuple([z.number(), z.number()])) });
export type BurnRecord = z.infer<typeof BurnRecord>;

export function burnBucketMs(lookbackMs: number): number {
  return Math.max(1, Math.floor(lookbackMs / BURN_BUCKETS));
}

/** Adds samples (bucket start -> amount) and drops buckets older than the lookback. */
export function mergeSamples(
  rec: BurnRecord,
  samples: ReadonlyMap<number, number>,
  nowMs: number,
  lookbackMs: number,
): BurnRecord {
  const byStart = new Map(rec.buckets);
  for (const [start, amount] of samples) byStart.set(start, (byStart.get(start) ?? 0) + amount);
  const oldest = nowMs - lookbackMs - burnBucketMs(lookbackMs);
  const buckets = [...byStart].filter(([start]) => start >= oldest).sort((a, b) => a[0] - b[0]);
  return { buckets };
}

/**
 * Units per second over the lookback. A window that started burning recently is measured over
 * the time since its first sample (at least one bucket), not the whole lookback, so a sudden
 * burst is not diluted.
 */
export function burnPerSecond(rec: BurnRecord, nowMs: number, lookbackMs: number): number {
  const bucketMs = burnBucketMs(lookbackMs);
  const from = nowMs - lookbackMs;
  const inside = rec.buckets.filter(([start]) => start + bucketMs > from);
  const first = inside[0];
  if (!first) return 0;
  const total = inside.reduce((sum, [, amount]) => sum + amount, 0);
  const spanMs = Math.min(lookbackMs, Math.max(bucketMs, nowMs - first[0]));
  return Math.max(0, total) / (spanMs / 1_000);
}

function windowLengthMs(window: BudgetWindow): number {
  const g = WINDOW_GRANULARITY[window];
  return g.bucketMs * g.buckets;
}

/**
 * The window period a warning belongs to ("once per window period"): consecutive spans of the
 * window's length since the epoch, or the calendar month for a calendar window.
 */
export function windowPeriod(window: BudgetWindow, nowMs: number, calendar: boolean): number {
  if (window === 'month' && calendar) return windowBounds('month', nowMs, true).currentBucket;
  return Math.floor(nowMs / windowLengthMs(window));
}

export interface ProjectionInput {
  limit: number;
  used: number;
  window: BudgetWindow;
  calendar: boolean;
  burnPerSecond: number;
  nowMs: number;
  horizonSeconds: number;
}

/**
 * When the window runs out at the current burn, if that is within the horizon. Not projected:
 * no burn, a window already at its limit (suspension and thresholds cover it), a sliding
 * window whose steady state at this burn fits the limit (usage ages out as fast as it comes),
 * and a calendar window that resets before it would run out.
 */
export function projectExhaustion(p: ProjectionInput): number | undefined {
  const remaining = p.limit - p.used;
  if (remaining <= 0 || p.burnPerSecond <= 0) return undefined;
  const etaSeconds = remaining / p.burnPerSecond;
  if (etaSeconds > p.horizonSeconds) return undefined;
  const at = p.nowMs + etaSeconds * 1_000;
  if (p.window === 'month' && p.calendar) {
    const d = new Date(p.nowMs);
    if (at >= Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1)) return undefined;
  } else if ((p.burnPerSecond * windowLengthMs(p.window)) / 1_000 < p.limit) {
    return undefined;
  }
  return Math.round(at);
}
