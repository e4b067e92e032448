import type { UsageReply, WindowState } from '@holdfast/events';
import { describe, expect, it } from 'vitest';
import { boundsAt, compare, exceeds, type TenantSums, type WindowSums } from './audit.js';

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

function sums(t: string, lifetime: number, usd: number, org = t): TenantSums {
  return { tenant: t, org, lifetimeTokens: lifetime, lifetimeMicroUsd: usd };
}

/** What the events of `org` added to one window (`level` as w_level keeps it) since each bound. */
function win(
  org: string,
  level: string,
  budget: string,
  amount: number,
  since: Partial<Record<keyof WindowSums['since'], number>> = {},
): WindowSums {
  return {
    org,
    level,
    budget,
    since: {
      minute: since.minute ?? amount,
      day: since.day ?? amount,
      month: since.month ?? amount,
      month_calendar: since.month_calendar ?? amount,
    },
  };
}

describe('drift audit: compare', () => {
  it('reports zero drift when ClickHouse sums match, each window against its own sum', () => {
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
    const report = compare(usage, {
      tenants: [sums('team-a', 100, 50, 'acme'), sums('team-b', 200, 70, 'acme')],
      windows: [
        win('acme', 'acme', 'month-tokens', 300),
        win('acme', 'team-a', 'minute-tokens', 100, { minute: 40 }),
        win('acme', 'team-a', 'day-usd', 50),
      ],
    });
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
    const report = compare(usage, {
      tenants: [sums('team-a', 990, 500)],
      windows: [
        win('team-a', 'team-a', 'day-tokens', 990),
        win('team-a', 'team-a', 'minute-usd', 520),
      ],
    });
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

  it("a budget added mid-window or mid-call is its own events only, not the tenant's whole usage", () => {
    // team-a billed 1,000 tokens this day before its day budget existed; then a call held
    // since before the budget settled 300 (the new window got the whole 300, the event's own
    // charge was 120 over the hold's prompt) and a later call 50.
    const usage: UsageReply = {
      time: new Date(NOW).toISOString(),
      capacity: [],
      tenants: [
        tenant('team-a', null, 1_350, 0, [
          w('team-a', 'minute-tokens', 1_350),
          w('team-a', 'day-tokens', 350),
        ]),
      ],
    };
    const report = compare(usage, {
      tenants: [sums('team-a', 1_350, 0)],
      windows: [
        win('team-a', 'team-a', 'minute-tokens', 1_350),
        win('team-a', 'team-a', 'day-tokens', 350),
      ],
    });
    expect(report.maxDrift).toEqual({ tokens: 0, usd: 0 });
    // A budget with no event yet (added, nothing billed since): 0 against 0.
    const fresh = compare(
      {
        ...usage,
        tenants: [tenant('team-a', null, 1_350, 0, [w('team-a', 'month-tokens', 0)])],
      },
      { tenants: [sums('team-a', 1_350, 0)], windows: [] },
    );
    expect(fresh.rows.find((r) => r.counter === 'month-tokens')).toMatchObject({
      authority: 0,
      clickhouse: 0,
    });
  });

  it("audits key and end-user windows against their own w_level rows, apart from the team's", () => {
    const key = { ...w('apps', 'day-tokens', 70), scope: 'key' as const, subject: 'ops-1' };
    const user = { ...w('apps', 'day-tokens', 30), scope: 'end_user' as const, subject: 'u-9' };
    const t = {
      ...tenant('apps', 'acme', 500, 0, [w('apps', 'day-tokens', 500)]),
      keys: [{ id: 'ops-1', windows: [key] }],
      endUsers: [{ id: 'u-9', lastSeen: new Date(NOW).toISOString(), windows: [user] }],
      endUserCount: 1,
    };
    const usage: UsageReply = {
      time: new Date(NOW).toISOString(),
      capacity: [],
      tenants: [tenant('acme', null, 500, 0, []), t],
    };
    const windows = [
      win('acme', 'apps', 'day-tokens', 500),
      win('acme', 'apps/key:ops-1', 'day-tokens', 70),
      win('acme', 'apps/user:u-9', 'day-tokens', 30),
      // An end user the reply does not list (past the ten it lists per tenant): not compared.
      win('acme', 'apps/user:u-other', 'day-tokens', 5),
    ];
    const report = compare(usage, { tenants: [sums('apps', 500, 0, 'acme')], windows });
    expect(report.maxDrift).toEqual({ tokens: 0, usd: 0 });
    expect(report.rows.map((r) => `${r.tenant}/${r.counter}`)).toEqual(
      expect.arrayContaining([
        'apps/day-tokens',
        'apps/key:ops-1/day-tokens',
        'apps/user:u-9/day-tokens',
      ]),
    );
    expect(report.rows.map((r) => r.tenant)).not.toContain('apps/user:u-other');
    // The key's window drifts on its own.
    const drifted = compare(usage, {
      tenants: [sums('apps', 500, 0, 'acme')],
      windows: windows.map((x) =>
        x.level === 'apps/key:ops-1' ? win('acme', x.level, x.budget, 77) : x,
      ),
    });
    expect(drifted.rows.filter((r) => r.drift !== 0)).toEqual([
      expect.objectContaining({ tenant: 'apps/key:ops-1', counter: 'day-tokens', drift: 7 }),
    ]);
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
    const report = compare(usage, {
      tenants: [
        sums('team-a', 100, 50, 'acme'),
        sums('team-gone', 200, 70, 'acme'),
        sums('exp-1a2b-batch-summariser', 56_486, 9_000),
      ],
      windows: [
        win('acme', 'acme', 'month-tokens', 300),
        win('acme', 'team-gone', 'day-tokens', 200),
        win('exp-1a2b-batch-summariser', 'exp-1a2b-batch-summariser', 'day-tokens', 56_486),
      ],
    });
    expect(report.maxDrift).toEqual({ tokens: 0, usd: 0 });
    expect(report.rows.every((r) => r.drift === 0)).toBe(true);
    expect(report.rows.map((r) => r.tenant)).not.toContain('exp-1a2b-batch-summariser');
    expect(report.removed).toEqual([
      { tenant: 'team-gone', lifetimeTokens: 200, lifetimeMicroUsd: 70 },
      { tenant: 'exp-1a2b-batch-summariser', lifetimeTokens: 56_486, lifetimeMicroUsd: 9_000 },
    ]);
    expect(exceeds(report, 0)).toBe(false);
  });

  it('a team moved between orgs counts for each org where it was billed; its own counters in its org now', () => {
    // Its windows and lifetime live in its org's slot: moved to new-org, it started there at 0.
    const usage: UsageReply = {
      time: new Date(NOW).toISOString(),
      capacity: [],
      tenants: [
        tenant('old-org', null, 40, 0, [w('old-org', 'day-tokens', 40)]),
        tenant('new-org', null, 60, 0, []),
        tenant('team', 'new-org', 60, 0, [w('team', 'day-tokens', 60)]),
      ],
    };
    const report = compare(usage, {
      tenants: [sums('team', 40, 0, 'old-org'), sums('team', 60, 0, 'new-org')],
      windows: [
        win('old-org', 'old-org', 'day-tokens', 40),
        win('old-org', 'team', 'day-tokens', 40),
        win('new-org', 'team', 'day-tokens', 60),
      ],
    });
    expect(report.maxDrift).toEqual({ tokens: 0, usd: 0 });
    const row = (t: string, counter: string) =>
      report.rows.find((r) => r.tenant === t && r.counter === counter);
    expect(row('team', 'day-tokens')).toMatchObject({ authority: 60, clickhouse: 60 });
    expect(row('team', 'lifetime-tokens')).toMatchObject({ authority: 60, clickhouse: 60 });
    expect(report.removed).toEqual([]);
  });

  it("uses the calendar month bound for calendar budgets, a key's and end users' too", () => {
    const key = { ...w('t', 'month-tokens', 20), scope: 'key' as const, subject: 'k' };
    const user = { ...w('t', 'month-tokens', 10), scope: 'end_user' as const, subject: 'u' };
    const usage: UsageReply = {
      time: new Date(NOW).toISOString(),
      capacity: [],
      tenants: [
        {
          ...tenant('t', null, 500, 0, [w('t', 'month-tokens', 200)]),
          keys: [{ id: 'k', windows: [key] }],
          endUsers: [{ id: 'u', lastSeen: new Date(NOW).toISOString(), windows: [user] }],
        },
      ],
    };
    const ch = {
      tenants: [sums('t', 500, 0)],
      windows: [
        win('t', 't', 'month-tokens', 500, { month_calendar: 200 }),
        win('t', 't/key:k', 'month-tokens', 50, { month_calendar: 20 }),
        win('t', 't/user:u', 'month-tokens', 40, { month_calendar: 10 }),
      ],
    };
    const drift = (calendar?: Set<string>) =>
      Object.fromEntries(
        compare(usage, ch, calendar)
          .rows.filter((r) => r.counter === 'month-tokens')
          .map((r) => [r.tenant, r.drift]),
      );
    expect(drift()).toEqual({ t: 300, 't/key:k': 30, 't/user:u': 30 });
    expect(
      drift(new Set(['t/month-tokens', 't/key:k/month-tokens', 't/end_user/month-tokens'])),
    ).toEqual({ t: 0, 't/key:k': 0, 't/user:u': 0 });
  });

  it('takes window starts from the shared windowBounds', () => {
    const b = boundsAt(NOW);
    expect(b.minute).toBe(Math.floor(NOW / 1000) * 1000 - 59_000);
    expect(b.day).toBe(Math.floor(NOW / 60_000) * 60_000 - 1_439 * 60_000);
    expect(b.month_calendar).toBe(Date.UTC(2026, 10, 1));
  });
});
