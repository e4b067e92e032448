import { windowBounds, type BudgetWindow } from '@holdfast/events';
import { budgetsInChain, type CompiledConfig, type CompiledTenant } from '@holdfast/config';
import type { Keys } from './keys.js';

/** [current bucket, oldest bucket in the window, buckets per window, bucket length ms] */
type Bounds = [number, number, number, number];

interface PlanBudget {
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

interface PlanLevel {
  tenant: string;
  state: number;
  holds: number;
  maxInFlight: number;
}

/**
 * What a script needs to touch a tenant's tree: its keys (KEYS[1] outbox, KEYS[2] the
 * reservation or state hash, then the rest) and, in the spec, where each key sits. `json(extra)`
 * is the spec as the script's ARGV[1], with the call's own fields added.
 */
export interface Plan {
  keys: string[];
  spec: {
    now: number;
    levels: PlanLevel[];
    budgets: PlanBudget[];
    tenant: string;
    org: string;
  };
  json(extra?: Record<string, unknown>): string;
}

/** The part of a tenant's plan that only changes with the config: built once per config. */
interface Template {
  keys: string[];
  levels: PlanLevel[];
  budgets: PlanBudget[];
  /** JSON of levels, budgets, tenant, org and keepMs, without the braces. */
  json: string;
}

/** How long a closed reservation's record is kept, so a late duplicate is recognised. */
export const KEEP_CLOSED_MS = 24 * 3_600_000;

const templates = new WeakMap<CompiledConfig, Map<string, Template>>();

function template(cfg: CompiledConfig, tenant: CompiledTenant, keys: Keys): Template {
  let perConfig = templates.get(cfg);
  if (!perConfig) templates.set(cfg, (perConfig = new Map<string, Template>()));
  const cacheKey = `${keys.prefix}\u0000${tenant.id}`;
  const cached = perConfig.get(cacheKey);
  if (cached) return cached;
  const org = tenant.org;
  // KEYS[1] and KEYS[2] are the outbox and the per-call hash; the rest start at 3.
  const list: string[] = [];
  const add = (k: string): number => list.push(k) + 2;
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
  const json = JSON.stringify({
    kp: keys.prefix,
    levels,
    budgets,
    tenant: tenant.id,
    org,
    keepMs: KEEP_CLOSED_MS,
  }).slice(1, -1);
  const t = { keys: [keys.outbox(org), '', ...list], levels, budgets, json };
  perConfig.set(cacheKey, t);
  return t;
}

/** Window bounds change at most once a second (the finest bucket): computed once per second. */
let boundsCache = { second: NaN, json: '' };

function boundsJson(now: number): string {
  const second = Math.floor(now / 1_000);
  if (boundsCache.second !== second) {
    const b = (w: BudgetWindow, calendar = false): Bounds => {
      const x = windowBounds(w, now, calendar);
      return [x.currentBucket, x.startBucket, x.currentBucket - x.startBucket + 1, x.bucketMs];
    };
    const d = new Date(now);
    const bounds = {
      minute: b('minute'),
      day: b('day'),
      month: b('month'),
      calmonth: b('month', true),
    };
    const nextMonthMs = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
    boundsCache = {
      second,
      json: `"bounds":${JSON.stringify(bounds)},"nextMonthMs":${nextMonthMs}`,
    };
  }
  return boundsCache.json;
}

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
  const t = template(cfg, tenant, keys);
  const list = t.keys.slice();
  list[1] = second;
  const fixed = `{${t.json},"now":${now},${boundsJson(now)}`;
  return {
    keys: list,
    spec: { now, levels: t.levels, budgets: t.budgets, tenant: tenant.id, org: tenant.org },
    json: (extra) => {
      const rest = extra ? JSON.stringify(extra).slice(1, -1) : '';
      return rest ? `${fixed},${rest}}` : `${fixed}}`;
    },
  };
}
