import { createHash } from 'node:crypto';
import type { BudgetWindow } from '@holdfast/events';
import {
  budgetsInChain,
  type CompiledBudget,
  type CompiledConfig,
  type CompiledTenant,
} from '@holdfast/config';
import type { Keys } from './keys.js';

interface PlanBudget {
  tenant: string;
  id: string;
  window: BudgetWindow;
  unit: 'tokens' | 'usd';
  limit: number;
  enforce: boolean;
  calendar: boolean;
  debt: number;
  /** Whose budget: t (the tenant's, `tenant` its level), k (the call's key), u (its end user). */
  scope: 't' | 'k' | 'u';
  /** The key id or end user (scopes k and u). */
  subject?: string;
  /** 1-based index into KEYS. */
  key: number;
}

/** The call whose key and end user may have budgets of their own. */
export interface PlanCall {
  keyId?: string | null | undefined;
  endUser?: string | undefined;
}

/** Every key and end user whose budgets a plan includes (usage reads many at once). */
export interface PlanSubjects {
  keyIds: readonly string[];
  endUsers: readonly string[];
}

function subjectsOf(call: PlanCall): PlanSubjects {
  return { keyIds: call.keyId ? [call.keyId] : [], endUsers: call.endUser ? [call.endUser] : [] };
}

interface PlanLevel {
  tenant: string;
  state: number;
  holds: number;
  maxInFlight: number;
}

/**
 * What a script needs to touch a tenant's tree: its keys (KEYS[1] the org's outbox, KEYS[2]
 * the reservation or state hash, KEYS[3] the org's lease index (also the root level's holds:
 * its `holds` is 3), KEYS[4] its refusal summaries,
 * then the rest) and, in the spec, where each key sits. `json(extra)` is the spec as the
 * script's ARGV[1], with the call's own fields added.
 */
export interface Plan {
  keys: string[];
  spec: {
    levels: PlanLevel[];
    budgets: PlanBudget[];
    tenant: string;
    org: string;
  };
  json(extra?: Record<string, unknown>): string;
  /**
   * The plan as positional strings (lib.lua's readPlan), for the scripts of every call: by
   * reference (the tenant's part named by its id, which the Redis keeps once it has seen it),
   * or with `full` the tenant's part in full, for a Redis that answered NOPLAN.
   */
  args(full: boolean): string[];
  /** A reservation record's levels and holds texts for this plan (lib.lua's recordHolds). */
  recordLevels: string;
  recordHolds: string;
}

/** The part of a tenant's plan that only changes with the config: built once per config. */
interface Template {
  keys: string[];
  levels: PlanLevel[];
  budgets: PlanBudget[];
  /** JSON of kp, levels, budgets, tenant, org and keepMs, without the braces. */
  json: string;
  /** The tenant's part of the positional plan (lib.lua's parseTemplate) and its id. */
  args: string[];
  id: string;
  holds: string;
}

/** How long a closed reservation's record is kept, so a late duplicate is recognised. */
export const KEEP_CLOSED_MS = 24 * 3_600_000;

/** An end user's windows outlive its last call by the longest window (30 days) and a day. */
export const END_USER_KEEP_MS = 31 * 86_400_000;

/** The keys every script takes first, in this order (see the scripts' headers). */
function fixedKeys(keys: Keys, org: string, second: string): string[] {
  return [keys.outbox(org), second, keys.leases(org), keys.refusals(org)];
}
const FIXED_KEYS = 4;
/** The index (1-based) of the org's lease index among the fixed keys. */
const LEASES_KEY = 3;

const templates = new WeakMap<CompiledConfig, Map<string, Template>>();

function template(cfg: CompiledConfig, tenant: CompiledTenant, keys: Keys): Template {
  let perConfig = templates.get(cfg);
  if (!perConfig) templates.set(cfg, (perConfig = new Map<string, Template>()));
  const cacheKey = `${keys.prefix}\u0000${tenant.id}`;
  const cached = perConfig.get(cacheKey);
  if (cached) return cached;
  const org = tenant.org;
  const list: string[] = [];
  const add = (k: string): number => list.push(k) + FIXED_KEYS;
  // The root level's in-flight set is the org's lease index, KEYS[3] (keys.leases): named once.
  const levels: PlanLevel[] = tenant.chain.map((id) => ({
    tenant: id,
    state: add(keys.state(org, id)),
    holds: id === org ? LEASES_KEY : add(keys.holds(org, id)),
    maxInFlight: cfg.tenants.get(id)?.maxInFlight ?? 0,
  }));
  const budgets: PlanBudget[] = budgetsInChain(cfg, tenant).map((b) =>
    planBudget(b, 't', add(keys.window(org, b.tenant, b.id))),
  );
  const json = JSON.stringify({
    kp: keys.prefix,
    levels,
    budgets,
    tenant: tenant.id,
    org,
    keepMs: KEEP_CLOSED_MS,
  }).slice(1, -1);
  const t = {
    keys: [...fixedKeys(keys, org, ''), ...list],
    levels,
    budgets,
    json,
    ...templateArgs(keys.prefix, org, tenant.id, levels, budgets),
  };
  perConfig.set(cacheKey, t);
  return t;
}

const WINDOW_CODE = { minute: 'm', day: 'd', month: 'M' } as const;
const UNIT_CODE = { tokens: 't', usd: 'u' } as const;

/**
 * How a reservation record names a budget's window (lib.lua's recordHolds reads it): the
 * level (its index in the chain, K the call's key, U its end user), the window (C a calendar
 * month) and the unit.
 */
function holdCode(levels: readonly PlanLevel[], b: PlanBudget): string {
  const level =
    b.scope === 'k' ? 'K' : b.scope === 'u' ? 'U' : levels.findIndex((l) => l.tenant === b.tenant);
  const w = b.window === 'month' && b.calendar ? 'C' : WINDOW_CODE[b.window];
  return `${level}${w}${UNIT_CODE[b.unit]}`;
}

/**
 * lib.lua's parseTemplate: kp, org, tenant, keepMs, the record's levels and holds texts, the
 * levels' count and (tenant, state, holds, maxInFlight) each, the budgets' count and each
 * budget (budgetArgs). Its id is a hash of that text: one id, one content. Amounts are
 * integers below 2^53, so String() writes every digit.
 */
function templateArgs(
  kp: string,
  org: string,
  tenant: string,
  levels: readonly PlanLevel[],
  budgets: readonly PlanBudget[],
): Pick<Template, 'args' | 'id' | 'holds'> {
  const holds = budgets.map((b) => holdCode(levels, b)).join(';');
  const args = [kp, org, tenant, String(KEEP_CLOSED_MS), levels.map((l) => l.tenant).join(';')];
  args.push(holds, String(levels.length));
  for (const l of levels)
    args.push(l.tenant, String(l.state), String(l.holds), String(l.maxInFlight));
  args.push(String(budgets.length));
  for (const b of budgets) args.push(...budgetArgs(b));
  const id = createHash('sha1').update(args.join('\u0000')).digest('base64url').slice(0, 20);
  return { args, id, holds };
}

/**
 * lib.lua's readBudget: tenant, id, window, unit, limit, enforce, calendar, debt, scope,
 * subject, key index, and its window state's text before and after `used,held`.
 */
function budgetArgs(b: PlanBudget): string[] {
  const enforce = b.enforce ? '1' : '0';
  const scoped = b.scope === 'k' || b.scope === 'u' ? `,${b.scope},${b.subject ?? ''}` : '';
  return [
    ...[b.tenant, b.id, b.window, b.unit, String(b.limit), enforce, b.calendar ? '1' : '0'],
    ...[String(b.debt), b.scope, b.subject ?? '', String(b.key)],
    ...[`${b.tenant},${b.id},${b.limit},`, `,${enforce}${scoped}`],
  ];
}

/**
 * lib.lua's readPlan: the tenant's part by id ('0') or in full ('1'), then the call's own
 * budgets (its key's and end user's): their count, each budget, and their holds' codes.
 */
function planArgs(
  t: Pick<Template, 'args' | 'id' | 'holds' | 'levels'>,
  extra: readonly PlanBudget[],
): Pick<Plan, 'args' | 'recordLevels' | 'recordHolds'> {
  const own = [String(extra.length)];
  for (const b of extra) own.push(...budgetArgs(b));
  const codes = extra.map((b) => holdCode(t.levels, b)).join(';');
  if (extra.length > 0) own.push(codes);
  const byRef = [t.id, '0', ...own];
  const inFull = [t.id, '1', ...t.args, ...own];
  return {
    args: (full) => (full ? inFull : byRef),
    recordLevels: t.args[4] ?? '',
    recordHolds: extra.length === 0 ? t.holds : t.holds ? `${t.holds};${codes}` : codes,
  };
}

function assemble(fixed: string): Plan['json'] {
  return (extra) => {
    const rest = extra ? JSON.stringify(extra).slice(1, -1) : '';
    return rest ? `{${fixed},${rest}}` : `{${fixed}}`;
  };
}

/**
 * Builds the keys and spec of one tenant's tree. `second` is KEYS[2]: the reservation hash for
 * admit/close, the tenant's state hash for suspension/usage. `now` is set only under a test
 * clock: otherwise each script reads Redis's own clock (TIME), the one time source of every
 * window decision whatever the skew between authority replicas.
 */
export function planFor(
  cfg: CompiledConfig,
  tenant: CompiledTenant,
  keys: Keys,
  now: number | undefined,
  second: string,
  call: PlanCall | PlanSubjects = {},
): Plan {
  const t = template(cfg, tenant, keys);
  const list = t.keys.slice();
  list[1] = second;
  const subjects = 'keyIds' in call ? call : subjectsOf(call);
  const extra = callBudgets(tenant, keys, subjects, (k) => list.push(k));
  const spec = { levels: t.levels, budgets: t.budgets, tenant: tenant.id, org: tenant.org };
  if (extra.length === 0) {
    return {
      keys: list,
      spec,
      json: assemble(now === undefined ? t.json : `${t.json},"now":${now}`),
      ...planArgs(t, extra),
    };
  }
  // The call's key or end user has budgets: the spec is this call's own (not the template's).
  const budgets = [...t.budgets, ...extra];
  const json = JSON.stringify({
    kp: keys.prefix,
    levels: t.levels,
    budgets,
    tenant: tenant.id,
    org: tenant.org,
    keepMs: KEEP_CLOSED_MS,
    ...(now === undefined ? {} : { now }),
  }).slice(1, -1);
  return {
    keys: list,
    spec: { ...spec, budgets },
    json: assemble(json),
    ...planArgs(t, extra),
  };
}

/** A budget as a script sees it, its window hash at KEYS[key]. */
function planBudget(
  b: CompiledBudget,
  scope: PlanBudget['scope'],
  key: number,
  subject?: string,
): PlanBudget {
  return {
    tenant: b.tenant,
    id: b.id,
    window: b.window,
    unit: b.unit,
    limit: b.limit,
    enforce: b.enforce,
    calendar: b.calendar,
    debt: b.debt,
    scope,
    ...(subject === undefined ? {} : { subject }),
    key,
  };
}

/** The budgets of the keys and end users, their window keys added with `add`. */
function callBudgets(
  tenant: CompiledTenant,
  keys: Keys,
  subjects: PlanSubjects,
  add: (key: string) => number,
): PlanBudget[] {
  const toPlan = (b: CompiledBudget, scope: 'k' | 'u', subject: string): PlanBudget =>
    planBudget(
      b,
      scope,
      add(
        scope === 'k'
          ? keys.keyWindow(tenant.org, tenant.id, subject, b.id)
          : keys.userWindow(tenant.org, tenant.id, subject, b.id),
      ),
      subject,
    );
  return [
    ...subjects.keyIds.flatMap((id) =>
      (tenant.keyBudgets.get(id) ?? []).map((b) => toPlan(b, 'k', id)),
    ),
    ...subjects.endUsers.flatMap((user) => tenant.endUserBudgets.map((b) => toPlan(b, 'u', user))),
  ];
}

/**
 * The plan of a reservation whose tenant has no tree in `org` any more (it moved to another
 * org or left the config): the org's fixed keys only. close.lua then works from the record.
 */
export function orphanPlan(
  keys: Keys,
  org: string,
  tenant: string,
  now: number | undefined,
  second: string,
): Plan {
  const base = JSON.stringify({
    kp: keys.prefix,
    levels: [],
    budgets: [],
    tenant,
    org,
    keepMs: KEEP_CLOSED_MS,
  }).slice(1, -1);
  return {
    keys: fixedKeys(keys, org, second),
    spec: { levels: [], budgets: [], tenant, org },
    json: assemble(now === undefined ? base : `${base},"now":${now}`),
    ...planArgs({ levels: [], ...templateArgs(keys.prefix, org, tenant, [], []) }, []),
  };
}
