import { z } from 'zod';
import { BudgetUnit, BudgetWindow } from './amounts.js';
import { TenantId } from './ids.js';

/** A budget's id inside its tenant: `<window>-<unit>`, e.g. `month-tokens`. */
export const BudgetId = z.string().regex(/^(minute|day|month)-(tokens|usd)$/);
export type BudgetId = z.infer<typeof BudgetId>;

/**
 * The state of one budget window after a change. Amounts are tokens, or micro-USD when
 * `unit` is `usd`. `used` is what was billed inside the sliding window; `held` is what live
 * reservations hold against it.
 */
export const WindowState = z.object({
  /** The tenant the budget belongs to: the team itself or an org above it. */
  tenant: TenantId,
  budget: BudgetId,
  window: BudgetWindow,
  unit: BudgetUnit,
  limit: z.number().int().min(0),
  used: z.number().int(),
  held: z.number().int().min(0),
  /** false for a shadow budget: evaluated and recorded, not enforced. */
  enforce: z.boolean(),
  /** Whose budget, when not the tenant's own (team or org): one of its keys', or end users'. */
  scope: z.enum(['key', 'end_user']).optional(),
  /** The key id or end user of a key or end-user budget. */
  subject: z.string().max(200).optional(),
  /**
   * What the event added to this window's `used`, where that is not the event's own charge
   * (`chargedTokens`, or `chargedMicroUsd` for a usd window); absent where it is. A close
   * charges a budget added since the call's admission otherwise: a settle bills it the whole
   * usage (the admission charged it nothing), an expiry nothing. Absent on events from before
   * it (those windows were charged the event's own).
   */
  charged: z.number().int().optional(),
  /**
   * true on a close's (or a `reservation.extended`'s) window that the tenant's plan no longer
   * has: the call was held on it and its budget was removed, or the tenant moved to another
   * parent or org or left the config, while the call was held. The close gave its hold back
   * and charged it, as the other windows (`charged` applies as above); an extension grew the
   * hold on it (nothing limits it any more); `used` and `held` are its state after that. It has
   * no limit here (`limit` 0, `enforce` false): not a budget to alert or suspend on. Absent
   * on every other window, and on events from before it (which did not list such windows).
   */
  removed: z.literal(true).optional(),
});
export type WindowState = z.infer<typeof WindowState>;

/**
 * What an event added to one of its windows' `used`: the window's own `charged` where the
 * event has one, else the event's charge in the window's unit (0 for an event that charges
 * nothing). So `used - windowCharge(...)` is the window just before the event.
 */
export function windowCharge(
  event: { chargedTokens?: number; chargedMicroUsd?: number },
  w: Pick<WindowState, 'unit' | 'charged'>,
): number {
  if (w.charged !== undefined) return w.charged;
  return (w.unit === 'usd' ? event.chargedMicroUsd : event.chargedTokens) ?? 0;
}

/** Utilisation of a window: billed usage over the limit (what alerts and suspension use). */
export function utilisation(w: Pick<WindowState, 'used' | 'limit'>): number {
  if (w.limit === 0) return w.used > 0 ? Infinity : 0;
  return w.used / w.limit;
}

/**
 * Window granularity: a sliding window is `buckets` buckets of `bucketMs`; usage billed at time
 * t lands in bucket floor(t / bucketMs) and leaves the window when that bucket is `buckets` old.
 * A calendar month window holds one bucket per UTC month.
 */
export const WINDOW_GRANULARITY = {
  minute: { bucketMs: 1_000, buckets: 60 },
  day: { bucketMs: 60_000, buckets: 1_440 },
  month: { bucketMs: 3_600_000, buckets: 720 },
} as const satisfies Record<BudgetWindow, { bucketMs: number; buckets: number }>;

export interface WindowBounds {
  /** The bucket usage billed now lands in. */
  currentBucket: number;
  /** The oldest bucket still inside the window. */
  startBucket: number;
  /** Usage billed at or after this instant counts (epoch ms). */
  startMs: number;
  /** Length of a bucket in ms (calendar months: 0, the bucket is the month index). */
  bucketMs: number;
}

/** Bounds of a window at `nowMs`, shared by the authority and the drift audit. */
export function windowBounds(window: BudgetWindow, nowMs: number, calendar = false): WindowBounds {
  if (window === 'month' && calendar) {
    const d = new Date(nowMs);
    const index = d.getUTCFullYear() * 12 + d.getUTCMonth();
    return {
      currentBucket: index,
      startBucket: index,
      startMs: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1),
      bucketMs: 0,
    };
  }
  const g = WINDOW_GRANULARITY[window];
  const currentBucket = Math.floor(nowMs / g.bucketMs);
  const startBucket = currentBucket - g.buckets + 1;
  return { currentBucket, startBucket, startMs: startBucket * g.bucketMs, bucketMs: g.bucketMs };
}

/**
 * Where a usage reply's `thresholds` keeps a window's soft thresholds: `<tenant>/<budget>` for
 * a team's or org's, `<tenant>/key:<key>/<budget>` for a key's, `<tenant>/end_user/<budget>`
 * for its end users' (one set for all of them).
 */
export function thresholdKey(
  w: Pick<WindowState, 'tenant' | 'budget' | 'scope' | 'subject'>,
): string {
  if (w.scope === 'key') return `${w.tenant}/key:${w.subject ?? ''}/${w.budget}`;
  if (w.scope === 'end_user') return `${w.tenant}/end_user/${w.budget}`;
  return `${w.tenant}/${w.budget}`;
}
