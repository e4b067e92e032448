import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { createClickHouse, migrate, raw, sql, qualified } from '@holdfast/billing-aggregator';
import { createLogger } from '@holdfast/runtime';
import { REPO_ROOT } from '@holdfast/stack';
import { infraTest as test } from '@holdfast/testkit';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const GRAFANA = resolve(REPO_ROOT, 'infra/grafana');

interface Target {
  refId: string;
  datasource: { type: string; uid: string };
  rawSql: string;
  format: number;
}
interface Panel {
  id: number;
  title: string;
  type: string;
  targets: Target[];
}

const dashboards = readdirSync(resolve(GRAFANA, 'dashboards')).map((file) => {
  const d = JSON.parse(readFileSync(resolve(GRAFANA, 'dashboards', file), 'utf8')) as {
    uid: string;
    panels: Panel[];
  };
  return { file, ...d };
});
const panels = dashboards.flatMap((d) => d.panels.map((p) => ({ dashboard: d.file, ...p })));

/**
 * What grafana-clickhouse-datasource does to a query before ClickHouse sees it, for the
 * macros the dashboards use (pkg/macros in grafana/clickhouse-datasource). Anything else
 * that starts with `$` fails the test: a macro that is not expanded here is not checked.
 */
function expandMacros(text: string, from: Date, to: Date): string {
  const seconds = (d: Date) => Math.floor(d.getTime() / 1000);
  const day = (d: Date) => d.toISOString().slice(0, 10);
  const expanded = text
    .replace(
      /\$__timeFilter\(([a-z_]+)\)/g,
      (_, c: string) =>
        `${c} >= toDateTime(${seconds(from)}) AND ${c} <= toDateTime(${seconds(to)})`,
    )
    .replace(
      /\$__dateFilter\(([a-z_]+)\)/g,
      (_, c: string) => `${c} >= toDate('${day(from)}') AND ${c} <= toDate('${day(to)}')`,
    )
    .replace(/\$__fromTime\b/g, `toDateTime(${seconds(from)})`)
    .replace(/\$__toTime\b/g, `toDateTime(${seconds(to)})`);
  if (expanded.includes('$')) throw new Error(`unexpanded macro or variable in:\n${text}`);
  return expanded;
}

describe('Grafana provisioning', () => {
  it('provisions the ClickHouse datasource every panel uses, and the dashboards folder', () => {
    const ds = parse(
      readFileSync(resolve(GRAFANA, 'provisioning/datasources/clickhouse.yaml'), 'utf8'),
    ) as {
      datasources: Array<{ uid: string; type: string; jsonData: Record<string, unknown> }>;
    };
    const [source] = ds.datasources;
    expect(source).toMatchObject({
      uid: 'holdfast-clickhouse',
      type: 'grafana-clickhouse-datasource',
      jsonData: { host: 'clickhouse', port: 8123, protocol: 'http', defaultDatabase: 'holdfast' },
    });
    expect(dashboards.map((d) => d.file).sort()).toEqual([
      'holdfast-budgets.json',
      'holdfast-cost.json',
    ]);
    for (const p of panels) {
      expect(p.targets.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets)
        expect(t.datasource, p.title).toEqual({ type: source!.type, uid: source!.uid });
    }
    const provider = parse(
      readFileSync(resolve(GRAFANA, 'provisioning/dashboards/holdfast.yaml'), 'utf8'),
    ) as {
      providers: Array<{ options: { path: string } }>;
    };
    expect(provider.providers[0]?.options.path).toBe('/etc/grafana/dashboards');
  });

  it('covers the views: tokens and cost per hour and day, refusals by reason, utilisation, top spenders', () => {
    const all = panels.flatMap((p) => p.targets.map((t) => t.rawSql)).join('\n');
    for (const view of [
      'usage_hourly_v1',
      'usage_daily_v1',
      'refusals_by_reason_v1',
      'budget_utilisation_v1',
      'budget_utilisation_hourly_v1',
      'top_spenders_v1',
    ]) {
      expect(all).toContain(`holdfast.${view}`);
    }
  });
});

/**
 * Every panel's query, macros expanded as the plugin does, runs on ClickHouse 18.16 (the
 * server of the test run) against the aggregator's own migrations and a few events. 18.16 is
 * the SQL subset that also runs on current ClickHouse (docs/clickhouse.md).
 */
test('every dashboard query runs on ClickHouse 18.16 against the aggregator schema', async ({
  clickhouseUrl,
  iso,
  clickhouse: _dropsTheDatabase,
}) => {
  const ch = createClickHouse({
    url: clickhouseUrl,
    username: 'default',
    password: '',
    quiet: true,
  });
  try {
    const database = iso.database;
    await migrate({ ch, database, logger: createLogger({ name: 'test', level: 'silent' }) });
    const now = Date.now();
    const at = (minutesAgo: number) => {
      const ms = now - minutesAgo * 60_000;
      return { ts: Math.floor(ms / 1000), time_ms: ms };
    };
    const windows = {
      w_level: ['team-a'],
      w_budget: ['month-tokens'],
      w_window: ['month'],
      w_unit: ['tokens'],
      w_limit: [40_000],
      w_used: [1_394],
      w_held: [0],
      w_enforce: [1],
    };
    const call = {
      tenant: 'team-a',
      org: 'acme',
      key_id: 'k1',
      use_case: 'UC-1',
      model: 'gpt-4o-mini',
    };
    // JSONEachRow: columns left out get their type's zero value (measured on ClickHouse 18.16).
    await ch.insert(qualified(database, 'events_raw_v1'), [
      {
        id: randomUUID(),
        type: 'reservation.created',
        ...at(90),
        ...call,
        ...windows,
        held_tokens: 1_394,
      },
      {
        id: randomUUID(),
        type: 'reservation.settled',
        ...at(89),
        ...call,
        ...windows,
        prompt_tokens: 370,
        completion_tokens: 1_024,
        billed_tokens: 1_394,
        cost_micro_usd: 670,
      },
      {
        id: randomUUID(),
        type: 'admission.refused',
        ...at(30),
        ...call,
        ...windows,
        code: 'budget_exceeded',
        needed_tokens: 1_394,
      },
      {
        id: randomUUID(),
        type: 'admission.refused',
        ...at(20),
        ...call,
        ...windows,
        code: 'budget_exceeded',
        shadow: 1,
      },
    ]);

    const from = new Date(now - 24 * 3600_000);
    const to = new Date(now);
    const answered: string[] = [];
    for (const p of panels) {
      for (const t of p.targets) {
        const text = expandMacros(t.rawSql, from, to).replace(/\bholdfast\./g, `${database}.`);
        const rows = await ch.query<Record<string, unknown>>(raw(text)).catch((err: Error) => {
          throw new Error(`${p.dashboard} / ${p.title}: ${err.message}\n${text}`);
        });
        if (t.format === 0) {
          // Time series: a `time` column first, then labels and values.
          expect(Object.keys(rows[0] ?? {})[0], p.title).toBe('time');
        }
        if (rows.length > 0) answered.push(p.title);
      }
    }
    // With one settled call, one refusal and one shadow refusal, every panel has something to show.
    expect(answered).toEqual(panels.map((p) => p.title));
    const [cost] = await ch.query<{ usd: number }>(
      sql`SELECT sum(cost_usd) AS usd FROM ${qualified(database, 'usage_hourly_v1')}`,
    );
    expect(cost?.usd).toBeCloseTo(0.00067);
  } finally {
    await ch.close();
  }
});
