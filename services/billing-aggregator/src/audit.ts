import { parseConfig } from '@holdfast/config';
import {
  thresholdKey,
  windowBounds,
  type BudgetWindow,
  type UsageReply,
  type WindowState,
} from '@holdfast/events';
import {
  BaseError,
  Err,
  Ok,
  errorMessage,
  type AuthorityClient,
  type Result,
} from '@holdfast/runtime';
import type { SqlExecutor } from './clickhouse.js';
import { windowLevel } from './rows.js';
import { qualified, sql, tuple } from './sql.js';

/**
 * The drift audit: the authority's counters against ClickHouse sums.
 *
 * Windows, per window: every event that moves a window lists it in its `w_*` arrays with what
 * it added to it (`w_charged`, migration 019: the window's own charge, so a budget added while
 * a call was held gets what the close billed it, the whole usage at a settle, nothing at an
 * expiry). A window lives in its org's slot (a team moved to another org starts there with
 * fresh windows), so the window (level L, budget B) of a tenant under org O has `used` = the
 * sum of `w_charged` over the events of org O that list (L, B), whose time is inside the
 * window's bounds at the authority's `time` (the shared `windowBounds`). A budget added
 * mid-window counts only the events since it existed (only those list it); removed tenants'
 * events count for the org windows they listed. A close lists every window it changed: the
 * plan's, and those its hold was on that the plan no longer has (`removed`: a budget removed,
 * a tenant moved or removed, while the call was held), so a budget added back within its
 * window is compared with what its closes billed it. Closes from before they listed those
 * count on the windows of their admission when they list none (below); one that listed some
 * of its tenant's windows (a budget removed while others stayed) missed the removed one's
 * charge, which leaves the window within a month. Key and end-user windows are rows of their
 * own (`w_level` `<team>/key:<key>`, `<team>/user:<end user>`), compared with the usage
 * reply's `keys` and `endUsers` (an end user it does not list is not compared). Rows written
 * before 019 have no `w_charged`: the event's `charged_tokens` / `charged_micro_usd` stands
 * for each window they list (exact but for a budget added while a call was held, which those
 * rows cannot tell; they leave the windows within a month of the upgrade).
 *
 * Lifetime, per tenant: a level's lifetime billed = the sum of `charged_*` over its events
 * without a time bound (the authority adds each charge to every level of the hierarchy), of
 * the org it is under today (its totals live in the org's slot too: a team moved to another
 * org starts there at 0). Which events count towards a level: for an org (a root), every event
 * that carried it as `org` (so teams removed from the config, or moved away, still count where
 * they were billed); for a team or a level in between, its own and those of the tenants below
 * it in today's config.
 * Tenants ClickHouse knows and the config no longer has (an experiment's teams, a deleted
 * team) have no counters to compare: they are listed apart, as information, never as drift.
 */

/** Event types that move windows. */
const MOVING = [
  'reservation.created',
  'reservation.settled',
  'reservation.released',
  'reservation.expired',
] as const;

/** Lifetime sums of charged amounts of one tenant's own events under one org. */
export interface TenantSums {
  tenant: string;
  /** The org the events carried (a team moved between orgs has a row per org). */
  org: string;
  lifetimeTokens: number;
  lifetimeMicroUsd: number;
}

type BoundName = 'minute' | 'day' | 'month' | 'month_calendar';

/** What the events of one org added to one window, since each bound (in the window's unit). */
export interface WindowSums {
  org: string;
  /** The window's level as `w_level` keeps it (see `windowLevel`). */
  level: string;
  budget: string;
  since: Record<BoundName, number>;
}

/** Both sides of ClickHouse the audit reads. */
interface ClickHouseSums {
  tenants: TenantSums[];
  windows: WindowSums[];
}

interface DriftRow {
  /**
   * The tenant the counter belongs to (the budget's level, or the tenant for lifetime); a key's
   * or an end user's window: `<team>/key:<key>`, `<team>/user:<end user>`.
   */
  tenant: string;
  /** A budget id (`month-tokens`) or `lifetime-tokens` / `lifetime-usd`. */
  counter: string;
  unit: 'tokens' | 'usd';
  authority: number;
  clickhouse: number;
  /** clickhouse - authority. */
  drift: number;
}

/** A tenant with events in ClickHouse that the config no longer has: not drift. */
interface RemovedTenant {
  tenant: string;
  lifetimeTokens: number;
  lifetimeMicroUsd: number;
}

export interface AuditReport {
  /** The authority's snapshot time; ClickHouse sums are taken at it. */
  time: string;
  rows: DriftRow[];
  maxDrift: { tokens: number; usd: number };
  /** Informational: billed tenants the config no longer has (their counters are gone). */
  removed: RemovedTenant[];
}

/** The start (epoch ms) of every window kind at `nowMs`. */
export function boundsAt(nowMs: number): Record<BoundName, number> {
  return {
    minute: windowBounds('minute', nowMs).startMs,
    day: windowBounds('day', nowMs).startMs,
    month: windowBounds('month', nowMs).startMs,
    month_calendar: windowBounds('month', nowMs, true).startMs,
  };
}

function boundName(window: BudgetWindow, calendar: boolean): BoundName {
  return window === 'month' && calendar ? 'month_calendar' : window;
}

const BOUNDS = ['minute', 'day', 'month', 'month_calendar'] as const;

/** Per-tenant lifetime sums from events_raw_v1 (deduplicated with FINAL), up to `nowMs`. */
export async function clickhouseSums(
  ch: SqlExecutor,
  database: string,
  nowMs: number,
): Promise<TenantSums[]> {
  const rows = await ch.query<Record<string, string | number>>(sql`
    SELECT
      tenant,
      org,
      sum(charged_tokens) AS lifetime_tokens,
      sum(charged_micro_usd) AS lifetime_usd
    FROM ${qualified(database, 'events_raw_v1')} FINAL
    WHERE type IN ${tuple(MOVING)} AND time_ms <= ${nowMs}
    GROUP BY tenant, org
    ORDER BY tenant, org`);
  return rows.map((r) => ({
    tenant: String(r.tenant),
    org: String(r.org),
    lifetimeTokens: Number(r.lifetime_tokens ?? 0),
    lifetimeMicroUsd: Number(r.lifetime_usd ?? 0),
  }));
}

/** The close event types: they bill the windows the hold was admitted on. */
const CLOSES = MOVING.slice(1);

/**
 * Per-window sums from events_raw_v1 FINAL, up to `nowMs`: what the events of each org added
 * to each (level, budget), since each bound, from two reads:
 * - the windows the events list: the arrays' indexes joined (a row from before migration 019
 *   has an empty `w_charged`, and ARRAY JOIN of arrays of different lengths fails); such a
 *   row's charge in the window's unit stands for its `w_charged`;
 * - the closes that list none but charged: of a tenant removed from the config, or moved to
 *   another org, while the call was held, written before closes listed the windows their
 *   hold was on (`removed`; since then such a close lists them, and is summed by the first
 *   read). close.lua ran them on the hold's record, billed the windows the hold was admitted
 *   on the event's own charge, and listed the tenant's plan in that org, which was empty.
 *   Their windows are the ones their `reservation.created` listed (the same org). The set of
 *   such closes is small: it is read first, then their admissions (without FINAL: a set, and
 *   ANY JOIN takes one admission of a twice-stored one). A close of today that lists none
 *   (its hold was on no window) joins an admission that lists none: it adds nothing.
 * Only events inside the longest window are summed (admissions of any age are read).
 *
 * The rule for a window's charge (`w_charged`, or the event's `charged_*` on a row from before
 * 019) is written twice: here and as window_states_v2's `charged` (migrations 020, 022, whose
 * files cannot change once applied). This read does not take the view's: ClickHouse 18.16 does
 * not push a WHERE into a view (`enable_optimize_predicate_expression` did not help), so the
 * view joins out every event ever stored, every window array with it, before the time bound
 * drops the old ones. Measured (`bench:audit-read`, 100,000 events inside the windows): with
 * 300,000 and 900,000 older events stored the view's read took 1.4-1.9x this one, a gap that
 * grows with the history kept; with none older it was faster (0.6x). The window-charge
 * contract (test/window-charge-contract.ts, on 18.16 and on current ClickHouse) holds the two
 * to the same sums, rows from before 019 and after; change both or neither.
 */
export async function windowSums(
  ch: SqlExecutor,
  database: string,
  nowMs: number,
): Promise<WindowSums[]> {
  const b = boundsAt(nowMs);
  const oldest = Math.min(...BOUNDS.map((name) => b[name]));
  const events = qualified(database, 'events_raw_v1');
  const inRange = sql`time_ms >= ${oldest} AND time_ms <= ${nowMs}`;
  const unlisted = sql`type IN ${tuple(CLOSES)} AND length(w_budget) = 0
        AND (charged_tokens != 0 OR charged_micro_usd != 0) AND ${inRange}`;
  // Each read gives (org, time_ms, level, budget, charge) per window an event charged.
  const listed = sql`
      SELECT
        org,
        time_ms,
        w_level[n] AS level,
        w_budget[n] AS budget,
        if(length(w_charged) = 0,
          if(w_unit[n] = 'usd', charged_micro_usd, charged_tokens),
          w_charged[n]) AS charge
      FROM ${events} FINAL
      ARRAY JOIN arrayEnumerate(w_budget) AS n
      WHERE type IN ${tuple(MOVING)} AND ${inRange}`;
  const admitted = sql`
      SELECT
        org,
        time_ms,
        held_level[n] AS level,
        held_budget[n] AS budget,
        if(held_unit[n] = 'usd', charged_micro_usd, charged_tokens) AS charge
      FROM (
        SELECT org, time_ms, charged_tokens, charged_micro_usd, held_level, held_budget, held_unit
        FROM (
          SELECT reservation_id, org, time_ms, charged_tokens, charged_micro_usd
          FROM ${events} FINAL
          WHERE ${unlisted}
        ) AS closes
        ANY INNER JOIN (
          SELECT reservation_id, w_level AS held_level, w_budget AS held_budget, w_unit AS held_unit
          FROM ${events}
          WHERE type = 'reservation.created' AND reservation_id IN (
            SELECT reservation_id FROM ${events} WHERE ${unlisted})
        ) AS admissions USING reservation_id
      )
      ARRAY JOIN arrayEnumerate(held_budget) AS n`;
  const rows = await ch.query<Record<string, string | number>>(sql`
    SELECT
      org,
      level,
      budget,
      sumIf(charge, time_ms >= ${b.minute}) AS minute,
      sumIf(charge, time_ms >= ${b.day}) AS day,
      sumIf(charge, time_ms >= ${b.month}) AS month,
      sumIf(charge, time_ms >= ${b.month_calendar}) AS month_calendar
    FROM (${listed} UNION ALL ${admitted})
    GROUP BY org, level, budget
    ORDER BY org, level, budget`);
  return rows.map((r) => {
    const since = {} as WindowSums['since'];
    for (const name of BOUNDS) since[name] = Number(r[name] ?? 0);
    return { org: String(r.org), level: String(r.level), budget: String(r.budget), since };
  });
}

/**
 * Compares the authority's usage with ClickHouse sums. `calendar` holds the `thresholdKey` of
 * the month budgets that reset on the 1st (from the config; sliding otherwise).
 */
export function compare(
  usage: UsageReply,
  sums: ClickHouseSums,
  calendar: ReadonlySet<string> = new Set(),
): AuditReport {
  const parent = new Map(usage.tenants.map((t) => [t.tenant, t.parent]));
  const isBelow = (t: string, level: string) => {
    for (let cur: string | null | undefined = t, hops = 0; cur && hops < 64; hops++) {
      if (cur === level) return true;
      cur = parent.get(cur);
    }
    return false;
  };
  /** The org (root) a tenant is under in today's config: where its windows live. */
  const orgOf = (t: string) => {
    let cur = t;
    for (let hops = 0; hops < 64; hops++) {
      const p = parent.get(cur);
      if (!p) break;
      cur = p;
    }
    return cur;
  };
  /** The sums whose events count towards level L's lifetime (see the module comment). */
  const under = (level: string) => {
    const org = orgOf(level);
    return sums.tenants.filter(
      (s) =>
        s.org === org &&
        (org === level || s.tenant === level || (parent.has(s.tenant) && isBelow(s.tenant, level))),
    );
  };
  const windowKey = (org: string, level: string, budget: string) =>
    `${org}\u0000${level}\u0000${budget}`;
  const perWindow = new Map(sums.windows.map((s) => [windowKey(s.org, s.level, s.budget), s]));
  const rows: DriftRow[] = [];
  const push = (tenant: string, counter: string, unit: 'tokens' | 'usd', a: number, c: number) =>
    rows.push({ tenant, counter, unit, authority: a, clickhouse: c, drift: c - a });

  const seenWindows = new Set<string>();
  const audit = (w: WindowState) => {
    const level = windowLevel(w);
    const key = windowKey(orgOf(w.tenant), level, w.budget);
    if (seenWindows.has(key)) return;
    seenWindows.add(key);
    const bound = boundName(w.window, calendar.has(thresholdKey(w)));
    push(level, w.budget, w.unit, w.used, perWindow.get(key)?.since[bound] ?? 0);
  };
  for (const t of usage.tenants) {
    // The authority bills every level of the hierarchy: an org's lifetime holds its teams'.
    const members = under(t.tenant);
    const lifetime = (k: 'lifetimeTokens' | 'lifetimeMicroUsd') =>
      members.reduce((sum, s) => sum + s[k], 0);
    push(t.tenant, 'lifetime-tokens', 'tokens', t.billedTokens, lifetime('lifetimeTokens'));
    push(t.tenant, 'lifetime-usd', 'usd', t.billedMicroUsd, lifetime('lifetimeMicroUsd'));
    for (const w of t.windows) audit(w);
    for (const k of t.keys) for (const w of k.windows) audit(w);
    for (const u of t.endUsers) for (const w of u.windows) audit(w);
  }
  return {
    time: usage.time,
    rows,
    maxDrift: maxDrift(rows),
    removed: removedTenants(sums.tenants, parent),
  };
}

/** Billed tenants the config no longer has, one entry each (summed over their orgs). */
function removedTenants(
  sums: TenantSums[],
  configured: ReadonlyMap<string, unknown>,
): RemovedTenant[] {
  const removed = new Map<string, RemovedTenant>();
  for (const s of sums) {
    if (configured.has(s.tenant)) continue;
    const r = removed.get(s.tenant) ?? { tenant: s.tenant, lifetimeTokens: 0, lifetimeMicroUsd: 0 };
    r.lifetimeTokens += s.lifetimeTokens;
    r.lifetimeMicroUsd += s.lifetimeMicroUsd;
    removed.set(s.tenant, r);
  }
  return [...removed.values()];
}

function maxDrift(rows: DriftRow[]): AuditReport['maxDrift'] {
  const max = (unit: 'tokens' | 'usd') =>
    rows.filter((r) => r.unit === unit).reduce((m, r) => Math.max(m, Math.abs(r.drift)), 0);
  return { tokens: max('tokens'), usd: max('usd') };
}

/** Why an audit could not run: one side of the comparison did not answer. */
class AuditError extends BaseError<'authority_unavailable' | 'clickhouse_unavailable'> {}

export type AuditResult = Result<AuditReport, AuditError>;

/** One audit: the authority's usage, then ClickHouse sums at the authority's time. */
export async function runAudit(opts: {
  ch: SqlExecutor;
  database: string;
  authority: AuthorityClient;
  tenant?: string;
  /**
   * Wait this long between the authority's snapshot (at time T) and the ClickHouse sums (of
   * events up to T). Both sides then cover the same events even under traffic, once every
   * event up to T has had time to be relayed and flushed (the periodic job waits two flush
   * intervals and 2 s). 0 for an audit after quiescence.
   */
  settleMs?: number;
}): Promise<AuditResult> {
  // Always every tenant: an org's windows add up the events of the teams below it.
  const usage = await opts.authority.usage({});
  if (!usage.ok) {
    return Err(
      new AuditError({
        code: 'authority_unavailable',
        message: `authority: ${usage.error.message}`,
        retry: true,
        cause: usage.error,
      }),
    );
  }
  const calendar = new Set<string>();
  const cfg = await opts.authority.configGet();
  if (cfg.ok) {
    const parsed = parseConfig(cfg.value.config, 'stored config', { limits: false });
    if (parsed.ok) {
      for (const t of parsed.value.tenants.values()) {
        const budgets = [t.budgets, ...t.keyBudgets.values(), t.endUserBudgets].flat();
        for (const b of budgets) {
          if (!b.calendar) continue;
          const scope = b.scope === 'tenant' ? undefined : b.scope;
          calendar.add(
            thresholdKey({
              tenant: b.tenant,
              budget: b.id,
              scope,
              subject: b.subject ?? undefined,
            }),
          );
        }
      }
    }
  }
  if (opts.settleMs) await new Promise((r) => setTimeout(r, opts.settleMs));
  try {
    const at = Date.parse(usage.value.time);
    const [tenants, windows] = await Promise.all([
      clickhouseSums(opts.ch, opts.database, at),
      windowSums(opts.ch, opts.database, at),
    ]);
    const report = compare(usage.value, { tenants, windows }, calendar);
    return Ok(opts.tenant ? only(report, opts.tenant) : report);
  } catch (err) {
    return Err(
      new AuditError({
        code: 'clickhouse_unavailable',
        message: `clickhouse: ${errorMessage(err)}`,
        retry: true,
        cause: err,
      }),
    );
  }
}

/** One tenant's counters, its keys' and end users' windows included (`<team>/...`). */
function only(report: AuditReport, tenant: string): AuditReport {
  const rows = report.rows.filter((r) => r.tenant === tenant || r.tenant.startsWith(`${tenant}/`));
  const removed = report.removed.filter((r) => r.tenant === tenant);
  return { ...report, rows, maxDrift: maxDrift(rows), removed };
}

/** Above the threshold in either unit (tokens, micro-USD). */
export function exceeds(report: AuditReport, threshold: number): boolean {
  return report.maxDrift.tokens > threshold || report.maxDrift.usd > threshold;
}
