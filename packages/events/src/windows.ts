import { z } from 'zod';
import { BudgetUnit, BudgetWindow } from './amounts.js';
import { TenantId } from './ids.js';

/** A budget's id inside its tenant: `<window>-<unit>`, e.g. `month-tokens`. */
export const BudgetId = z.string().regex(/^(minute|day|month)-(tokens|usd)$/);
export type BudgetId = z.infer<typeof BudgetId>;

export function budgetId(window: BudgetWindow, unit: BudgetUnit): BudgetId {
  return `${window}-${unit}`;
}

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
});
export type WindowState = z.infer<typeof WindowState>;

/** Utilisation of a window, counting what is held: (used + held) / limit. */
export function utilisation(w: Pick<WindowState, 'used' | 'held' | 'limit'>): number {
  if (w.limit === 0) return w.used + w.held > 0 ? Infinity : 0;
  return (w.used + w.held) / w.limit;
}
