import type { UsageReply, WindowState } from '@holdfast/events';
import { describe, expect, it } from 'vitest';
import { boundsAt, compare, exceeds, type TenantSums } from './audit.js';

const NOW = Date.UTC(2026, 10, 30, 12, 0, 30, 500);

function w(tenant: string, budget: WindowState['budget'], used: number): WindowState {
  const [window, unit] = budget.split('-') as [WindowState['window'], WindowState['unit']];
  return { tenant, budget, window, unit, limit: 1_000_000, used, held: 0, enforce: true };
}

function tenant(
  id: string,
  parent: string | null,
  billed: number,
  usd: number,
  windows: WindowState[],
) {
  return {
    tenant: id,
    parent,
    mode: 'reserve' as const,
    suspended: false,
    suspendedBy: [],
    overruns: { count: 0, tokens: 0, microUsd: 0, lastAt: null },
    inFlight: 0,
    maxInFlight: null,
    billedTokens: billed,
    billedMicroUsd: usd,
    windows,
    thresholds: {},
    keys: [],
    endUsers: [],
    endUserCount: 0,
  };
}

function sums(
  t: string,
  lifetime: number,
  usd: number,
  since: Partial<Record<string, number>>,
  org = t,
): TenantSums {
  const s: TenantSums['since'] = {};
  for (const k of ['minute', 'day', 'month', 'month_calendar']) {
    s[k] = { tokens: since[k] ?? lifetime, microUsd: since[`${k}_usd`] ?? usd };
  }
  return { tenant: t, org, lifetimeTokens: lifetime, lifetimeMicroUsd: usd, since: s };
}

describe('drift audit: compare', () => {
  it('reports zero drift when ClickHouse sums match, summing teams into their org windows', () => {
    const usage: UsageReply = {
      time: new Date(NOW).toISOString(),
      capacity: [],
      tenants: [
        tenant('acme', null, 300, 120, [w('acme', 'month-tokens', 300)]),
        tenant('team-a', 'acme', 100, 50, [
          w('team-a', 'minute-tokens', 40),
          w('team-a', 'day-usd', 50),
          w('acme', 'month-tokens', 300),
        ]),
        tenant('team-b', 'acme', 200, 70, [w('acme', 'month-tokens', 300)]),
      ],
    };
    const report = compare(usage, [
      sums('team-a', 100, 50, { minute: 40 }, 'acme'),
      sums('team-b', 200, 70, {}, 'acme'),
    ]);
    expect(report.maxDrift).toEqual({ tokens: 0, usd: 0 });
    expect(
      report.rows.find((r) => r.tenant === 'acme' && r.counter === 'month-tokens'),
    ).toMatchObject({
      authority: 300,
      clickhouse: 300,
    });
    // acme's month window appears once, though three tenants report it.
    expect(report.rows.filter((r) => r.counter === 'month-tokens')).toHaveLength(1);
    expect(exceeds(report, 0)).toBe(false);
  });

  it('shows missing and extra usage as signed drift, per counter and unit', () => {
    const usage: UsageReply = {
      time: new Date(NOW).toISOString(),
      capacity: [],
      tenants: [
        tenant('team-a', null, 1_000, 500, [
          w('team-a', 'day-tokens', 1_000),
          w('team-a', 'minute-usd', 500),
        ]),
      ],
    };
    const report = compare(usage, [sums('team-a', 990, 500, { day: 990, minute_usd: 520 })]);
    const byCounter = Object.fromEntries(
      report.rows.map((r) => [`${r.tenant}/${r.counter}`, r.drift]),
    );
    expect(byCounter).toMatchObject({
      'team-a/lifetime-tokens': -10,
      'team-a/day-tokens': -10,
      'team-a/minute-usd': 20,
    });
    expect(report.maxDrift).toEqual({ tokens: 10, usd: 20 });
    expect(exceeds(report, 10)).toBe(true);
    expect(exceeds(report, 20)).toBe(false);
  });

  it('tenants the config no longer has are listed apart, not drift; their org still counts them', () => {
    // The experiment's team and a team removed from acme: billed, then gone from the config.
    const usage: UsageReply = {
      time: new Date(NOW).toISOString(),
      capacity: [],
      tenants: [
        tenant('acme', null, 300, 120, [w('acme', 'month-tokens', 300)]),
        tenant('team-a', 'acme', 100, 50, [w('acme', 'month-tokens', 300)]),
      ],
    };
    const report = compare(usage, [
      sums('team-a', 100, 50, {}, 'acme'),
      sums('team-gone', 200, 70, {}, 'acme'),
      sums('exp-1a2b-batch-summariser', 56_486, 9_000, {}),
    ]);
    expect(report.maxDrift).toEqual({ tokens: 0, usd: 0 });
    expect(report.rows.every((r) => r.drift === 0)).toBe(true);
    expect(report.rows.map((r) => r.tenant)).not.toContain('exp-1a2b-batch-summariser');
    expect(report.removed).toEqual([
      { tenant: 'team-gone', lifetimeTokens: 200, lifetimeMicroUsd: 70 },
      { tenant: 'exp-1a2b-batch-summariser', lifetimeTokens: 56_486, lifetimeMicroUsd: 9_000 },
    ]);
    expect(exceeds(report, 0)).toBe(false);
  });

  it('a team moved between orgs counts for each org where it was billed', () => {
    const usage: UsageReply = {
      time: new Date(NOW).toISOString(),
      capacity: [],
      tenants: [
        tenant('old-org', null, 40, 0, []),
        tenant('new-org', null, 60, 0, []),
        tenant('team', 'new-org', 100, 0, []),
      ],
    };
    const report = compare(usage, [
      sums('team', 40, 0, {}, 'old-org'),
      sums('team', 60, 0, {}, 'new-org'),
    ]);
    expect(report.maxDrift).toEqual({ tokens: 0, usd: 0 });
    expect(report.removed).toEqual([]);
  });

  it('uses the calendar month bound for calendar budgets', () => {
    const usage: UsageReply = {
      time: new Date(NOW).toISOString(),
      capacity: [],
      tenants: [tenant('t', null, 500, 0, [w('t', 'month-tokens', 200)])],
    };
    const s = sums('t', 500, 0, { month: 500, month_calendar: 200 });
    expect(compare(usage, [s]).rows.find((r) => r.counter === 'month-tokens')?.drift).toBe(300);
    expect(
      compare(usage, [s], new Set(['t/month-tokens'])).rows.find(
        (r) => r.counter === 'month-tokens',
      )?.drift,
    ).toBe(0);
  });

  it('takes window starts from the shared windowBounds', () => {
    const b = boundsAt(NOW);
    expect(b.minute).toBe(Math.floor(NOW / 1000) * 1000 - 59_000);
    expect(b.day).toBe(Math.floor(NOW / 60_000) * 60_000 - 1_439 * 60_000);
    expect(b.month_calendar).toBe(Date.UTC(2026, 10, 1));
  });
});
