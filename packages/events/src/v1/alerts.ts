import { z } from 'zod';
import { BudgetUnit, BudgetWindow } from '../amounts.js';
import { envelopeFields, IsoTime } from '../envelope.js';
import { TenantId } from '../ids.js';
import { BudgetId } from '../windows.js';
import { count, windowsField } from './common.js';

/** Which budget an alert is about: the level (team or org) and its window. */
const budgetFields = {
  level: TenantId,
  budget: BudgetId,
  window: BudgetWindow,
  unit: BudgetUnit,
};

export const ThresholdCrossed = z.object({
  ...envelopeFields,
  type: z.literal('threshold.crossed'),
  ...budgetFields,
  /** The soft threshold crossed upward, as a fraction of the limit (0.8 = 80%). */
  threshold: z.number().min(0).max(10),
  /** used / limit at the crossing. */
  utilisation: z.number().min(0),
  limit: count,
  used: z.int(),
  held: count,
  /** The id of the event whose window state showed the crossing. */
  causeEventId: z.string(),
  ...windowsField,
});

export const TenantSuspended = z.object({
  ...envelopeFields,
  type: z.literal('tenant.suspended'),
  reason: z.string().max(500),
  budget: BudgetId.nullable(),
  /** Calls already in flight may still settle for this long. */
  graceMs: count,
  by: z.enum(['alerter', 'admin']),
  ...windowsField,
});

export const TenantResumed = z.object({
  ...envelopeFields,
  type: z.literal('tenant.resumed'),
  by: z.enum(['admin', 'window_freed']),
  ...windowsField,
});

export const BudgetExhaustionProjected = z.object({
  ...envelopeFields,
  type: z.literal('budget.exhaustion_projected'),
  ...budgetFields,
  /** Recent burn, units per second. */
  burnPerSecond: z.number().min(0),
  projectedExhaustionAt: IsoTime,
  horizonSeconds: count,
  limit: count,
  used: z.int(),
  held: count,
  ...windowsField,
});

export type ThresholdCrossed = z.infer<typeof ThresholdCrossed>;
export type TenantSuspended = z.infer<typeof TenantSuspended>;
export type TenantResumed = z.infer<typeof TenantResumed>;
export type BudgetExhaustionProjected = z.infer<typeof BudgetExhaustionProjected>;
