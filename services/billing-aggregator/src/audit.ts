import { parseConfig } from '@holdfast/config';
import { windowBounds, type BudgetWindow, type UsageReply } from '@holdfast/events';
import {
  BaseError,
  Err,
  Ok,
  errorMessage,
  type AuthorityClient,
  type Result,
} from '@holdfast/runtime';
import type { SqlExecutor } from './clickhouse.js';
import { qualified, sql } from './sql.js';

/**
 * The drift audit: the authority's counters against ClickHouse sums.
 *
 * Every event that moves a window carries `chargedTokens`/`chargedMicroUsd`, what it added to
 * the windows' `used` at the event's time. So for a budget of level L (a team or an org above
 * it), `used` = the sum of charged amounts over the events of L and of every tenant below it
 * whose time is inside the window's bounds at the authority's `time` (the shared
 * `windowBounds`), and a level's lifetime billed = the sum of charged over the same events
 * without a time bound (the authority adds each charge to every level of the hierarchy).
 *
 * Which events count towards a level: its own; for an org (a root), every event that carried
 * it as `org` (so teams removed from the config, or moved away, still count where they were
 * billed); for a level in between, the events of the tenants below it in today's config.
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

/** Sums of charged amounts of one tenant's own events under one org: lifetime and since each bound. */
export interface TenantSums {
  tenant: string;
  /** The org the events carried (a team moved between orgs has a row per org). */
  org: string;
  lifetimeTokens: number;
  lifetimeMicroUsd: number;
  /** Keyed by bound name (see `boundsAt`). */
  since: Record<string, { tokens: number; microUsd: number }>;
}

interface DriftRow {
  /** The tenant the counter belongs to (the budget's level, or the tenant for lifetime). */
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

type BoundName = 'minute' | 'day' | 'month' | 'month_calendar';

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

/** Per-tenant sums from events_raw_v1 (deduplicated with FINAL), up to `nowMs`. */
export async function clickhouseSums(
  ch: SqlExecutor,
  database: string,
  nowMs: number,
): Promise<TenantSums[]> {
  const b = boundsAt(nowMs);
  const rows = await ch.query<Record<string, string | number>>(sql`
    SELECT
      tenant,
      org,
      sum(charged_tokens) AS lifetime_tokens,
      sum(charged_micro_usd) AS lifetime_usd,
      sumIf(charged_tokens, time_ms >= ${b.minute}) AS minute_tokens,
      sumIf(charged_micro_usd, time_ms >= ${b.minute}) AS minute_usd,
      sumIf(charged_tokens, time_ms >= ${b.day}) AS day_tokens,
      sumIf(charged_micro_usd, time_ms >= ${b.day}) AS day_usd,
      sumIf(charged_tokens, time_ms >= ${b.month}) AS month_tokens,
      sumIf(charged_micro_usd, time_ms >= ${b.month}) AS month_usd,
      sumIf(charged_tokens, time_ms >= ${b.month_calendar}) AS month_calendar_tokens,
      sumIf(charged_micro_usd, time_ms >= ${b.month_calendar}) AS month_calendar_usd
    FROM ${qualified(database, 'events_raw_v1')} FINAL
    WHERE type IN (${MOVING[0]}, ${MOVING[1]}, ${MOVING[2]}, ${MOVING[3]}) AND time_ms <= ${nowMs}
    GROUP BY tenant, org
    ORDER BY tenant, org`);
  return rows.map((r) => {
    const n = (k: string) => Number(r[k] ?? 0);
    const since = {} as TenantSums['since'];
    for (const name of ['minute', 'day', 'month', 'month_calendar'] as const) {
      since[name] = { tokens: n(`${name}_tokens`), microUsd: n(`${name}_usd`) };
    }
    return {
      tenant: String(r.tenant),
      org: String(r.org),
      lifetimeTokens: n('lifetime_tokens'),
      lifetimeMicroUsd: n('lifetime_usd'),
      since,
    };
  });
}

/**
 * Compares the authority's usage with ClickHouse sums. `calendar` holds `level/budget` of the
 * month budgets that reset on the 1st (from the config; sliding otherwise).
 */
export function compare(
  usage: UsageReply,
  sums: TenantSums[],
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
  /** The sums whose events count towards level L (see the module comment). */
  const under = (level: string) =>
    sums.filter(
      (s) =>
        s.tenant === level ||
        (parent.get(level) === null
          ? s.org === level
          : parent.has(s.tenant) && isBelow(s.tenant, level)),
    );
  const rows: DriftRow[] = [];
  const push = (tenant: string, counter: string, unit: 'tokens' | 'usd', a: number, c: number) =>
    rows.push({ tenant, counter, unit, authority: a, clickhouse: c, drift: c - a });

  const seenWindows = new Set<string>();
  for (const t of usage.tenants) {
    // The authority bills every level of the hierarchy: an org's lifetime holds its teams'.
    const members = under(t.tenant);
    const lifetime = (k: 'lifetimeTokens' | 'lifetimeMicroUsd') =>
      members.reduce((sum, s) => sum + s[k], 0);
    push(t.tenant, 'lifetime-tokens', 'tokens', t.billedTokens, lifetime('lifetimeTokens'));
    push(t.tenant, 'lifetime-usd', 'usd', t.billedMicroUsd, lifetime('lifetimeMicroUsd'));
    for (const w of t.windows) {
      const key = `${w.tenant}/${w.budget}`;
      if (seenWindows.has(key)) continue;
      seenWindows.add(key);
      const bound = boundName(w.window, calendar.has(key));
      let total = 0;
      for (const s of under(w.tenant)) {
        const since = s.since[bound];
        total += (w.unit === 'usd' ? since?.microUsd : since?.tokens) ?? 0;
      }
      push(w.tenant, w.budget, w.unit, w.used, total);
    }
  }
  return {
    time: usage.time,
    rows,
    maxDrift: maxDrift(rows),
    removed: removedTenants(sums, parent),
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
        for (const b of t.budgets) if (b.calendar) calendar.add(`${b.tenant}/${b.id}`);
      }
    }
  }
  if (opts.settleMs) await new Promise((r) => setTimeout(r, opts.settleMs));
  try {
    const sums = await clickhouseSums(opts.ch, opts.database, Date.parse(usage.value.time));
    const report = compare(usage.value, sums, calendar);
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

function only(report: AuditReport, tenant: string): AuditReport {
  const rows = report.rows.filter((r) => r.tenant === tenant);
  const removed = report.removed.filter((r) => r.tenant === tenant);
  return { ...report, rows, maxDrift: maxDrift(rows), removed };
}

/** Above the threshold in either unit (tokens, micro-USD). */
export function exceeds(report: AuditReport, threshold: number): boolean {
  return report.maxDrift.tokens > threshold || report.maxDrift.usd > threshold;
}
