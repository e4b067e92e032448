import { windowBounds, type BudgetWindow } from '@holdfast/events';
import { budgetsInChain, type CompiledConfig, type CompiledTenant } from '@holdfast/config';
import type { Keys } from './keys.js';

/** [current bucket, oldest bucket in the window, buckets per window, bucket length ms] */
type Bounds = [number, number, number, number];

export interface PlanBudget {
  tenant: string;
  id: string;
  window: BudgetWindow;
  unit: 'tokens' | 'usd';
  limit: number;
  enforce: boolean;
  calendar: boolean;
  debt: number;
  /** 1-based index into KEYS. */
  key: number;
}

export interface PlanLevel {
  tenant: string;
  state: number;
  holds: number;
  maxInFlight: number;
}

/**
 * What a script needs to touch a tenant's tree: its keys (KEYS[1] outbox, KEYS[2] the
 * reservation or state hash, then the rest) and, in the spec, where each key sits.
 */
export interface Plan {
  keys: string[];
  spec: {
    now: number;
    bounds: Record<'minute' | 'day' | 'month' | 'calmonth', Bounds>;
    nextMonthMs: number;
    levels: PlanLevel[];
    budgets: PlanBudget[];
    tenant: string;
    org: string;
    keepMs: number;
  };
}

function boundsAt(now: number): Plan['spec']['bounds'] {
  const b = (w: BudgetWindow, calendar = false): Bounds => {
    const x = windowBounds(w, now, calendar);
    const span = x.currentBucket - x.startBucket + 1;
    return [x.currentBucket, x.startBucket, span, x.bucketMs];
  };
  return { minute: b('minute'), day: b('day'), month: b('month'), calmonth: b('month', true) };
}

function nextMonthStart(now: number): number {
  const d = new Date(now);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

/** How long a closed reservation's record is kept, so a late duplicate is recognised. */
export const KEEP_CLOSED_MS = 24 * 3_600_000;

/**
 * Builds the keys and spec of one tenant's tree. `second` is KEYS[2]: the reservation hash for
 * admit/close, the tenant's state hash for suspension/usage.
 */
export function planFor(
  cfg: CompiledConfig,
  tenant: CompiledTenant,
  keys: Keys,
  now: number,
  second: string,
): Plan {
  const org = tenant.org;
  const list = [keys.outbox(org), second];
  const add = (k: string): number => list.push(k);
  const levels: PlanLevel[] = tenant.chain.map((id) => ({
    tenant: id,
    state: add(keys.state(org, id)),
    holds: add(keys.holds(org, id)),
    maxInFlight: cfg.tenants.get(id)?.maxInFlight ?? 0,
  }));
  const budgets: PlanBudget[] = budgetsInChain(cfg, tenant).map((b) => ({
    tenant: b.tenant,
    id: b.id,
    window: b.window,
    unit: b.unit,
    limit: b.limit,
    enforce: b.enforce,
    calendar: b.calendar,
    debt: b.debt,
    key: add(keys.window(org, b.tenant, b.id)),
  }));
  return {
    keys: list,
    spec: {
      now,
      bounds: boundsAt(now),
      nextMonthMs: nextMonthStart(now),
      levels,
      budgets,
      tenant: tenant.id,
      org,
      keepMs: KEEP_CLOSED_MS,
    },
  };
}
