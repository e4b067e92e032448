import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { HoldfastEvent } from '@holdfast/events';
import { createLogger } from '@holdfast/runtime';
import { expect } from 'vitest';
import { clickhouseSums, windowSums } from '../src/audit.js';
import type { SqlExecutor } from '../src/clickhouse.js';
import { migrate } from '../src/migrate.js';
import { RowBinaryEncoder } from '../src/rowbinary.js';
import { EVENTS_RAW_COLUMNS, rowProblem, toEventRow, writeEventRow } from '../src/rows.js';
import { qualified, sql, tuple, type Sql } from '../src/sql.js';
import { refusal, settledCall } from './events.js';
import { migrateUpTo, silent } from './harness.js';

/**
 * One contract, run on ClickHouse 18.16 (the Debian server, *.int.test.ts) and on current
 * ClickHouse (chdb, *.unit.test.ts): the migrations apply and re-apply, every view answers,
 * a twice-inserted batch counts once everywhere, and hostile strings round-trip as literals.
 */

export const HOSTILE_STRINGS = [
  "it's",
  "'; DROP TABLE events_raw_v1; --",
  "\\'; DROP DATABASE x; --",
  'back\\slash',
  'trailing backslash \\',
  '\\\\',
  'nul\u0000byte',
  'new\nline\r\nand\ttab',
  '\u0007\u0008\u000b\u000c\u001b\u007f',
  'unicode: ünïcødé, 日本語, emoji 🧾, rtl \u202e',
  '"double" `back` $dollar {braces} ?question',
  '',
  "''",
  "\\x27 is not a quote but this ' is",
];

const HOUR_MS = 3_600_000;

function contractEvents(): HoldfastEvent[] {
  // Two hours apart so hourly views show two buckets; tokens are distinct per call.
  const t0 = Date.UTC(2026, 10, 30, 9, 15);
  return [
    ...settledCall({ tenant: 'team-a', org: 'acme', atMs: t0, prompt: 100, completion: 10 }),
    ...settledCall({
      tenant: 'team-a',
      org: 'acme',
      atMs: t0 + 60_000,
      prompt: 200,
      completion: 20,
    }),
    ...settledCall({
      tenant: 'team-b',
      org: 'acme',
      atMs: t0 + 2 * HOUR_MS,
      prompt: 300,
      completion: 30,
      model: 'gpt-4o',
      useCase: 'UC-7',
    }),
    refusal({ tenant: 'team-a', org: 'acme', atMs: t0 + 120_000 }),
    refusal({ tenant: 'team-a', org: 'acme', atMs: t0 + 180_000, shadow: true }),
    refusal({ tenant: 'team-b', org: 'acme', atMs: t0 + 240_000, code: 'concurrency_limit' }),
  ];
}

const num = (v: unknown) => Number(v);
/** Rows in one order, whatever order they came in. */
const sorted = (rows: unknown[][]) => rows.map((r) => JSON.stringify(r)).sort();

export async function runSchemaContract(ch: SqlExecutor, database: string): Promise<void> {
  const logger = createLogger({ name: 'test', level: 'silent' });
  const first = await migrate({ ch, database, logger });
  expect(first.applied.length).toBeGreaterThanOrEqual(9);
  expect((await migrate({ ch, database, logger })).applied).toEqual([]);
  // 011's columns exist: run again (as after a crash before it was recorded), it adds nothing.
  const again = await rerunAsNew(ch, database, '011_alter_events_raw_v1.sql');
  expect(again).toEqual(['999_alter_events_raw_v1']);

  const t = (name: string): Sql => qualified(database, name);
  const events = contractEvents();
  const rows = events.map((e, i) => toEventRow(e, i + 1));
  // The same batch twice: a redelivery after a crash between insert and ack.
  await ch.insert(t('events_raw_v1'), rows);
  await ch.insert(t('events_raw_v1'), rows);

  const [rawAll] = await ch.query(sql`SELECT count() AS n FROM ${t('events_raw_v1')}`);
  expect(num(rawAll?.n)).toBeGreaterThanOrEqual(events.length);
  const [raw] = await ch.query(sql`SELECT count() AS n FROM ${t('events_raw_v1')} FINAL`);
  expect(num(raw?.n)).toBe(events.length);

  const hourly = await ch.query(
    sql`SELECT tenant, sum(calls) AS calls, sum(tokens) AS tokens, sum(cost_micro_usd_total) AS cost FROM ${t('usage_hourly_v1')} GROUP BY tenant ORDER BY tenant`,
  );
  expect(hourly.map((r) => [r.tenant, num(r.calls), num(r.tokens), num(r.cost)])).toEqual([
    ['team-a', 2, 330, 330],
    ['team-b', 1, 330, 330],
  ]);
  const hours = await ch.query(sql`SELECT DISTINCT hour FROM ${t('usage_hourly_v1')}`);
  expect(hours).toHaveLength(2);
  const daily = await ch.query(
    sql`SELECT sum(tokens_day) AS tokens, sum(calls_day) AS calls, count() AS groups FROM ${t('usage_daily_v1')}`,
  );
  expect(daily.map((r) => [num(r.tokens), num(r.calls), num(r.groups)])).toEqual([[660, 3, 2]]);

  const decisions = await ch.query(
    sql`SELECT decision, count() AS n FROM ${t('decisions_v2')} GROUP BY decision ORDER BY decision`,
  );
  expect(decisions.map((r) => [r.decision, num(r.n)])).toEqual([
    ['admit', 3],
    ['refuse', 3],
  ]);
  // One decision per admit or refusal event, by id, with the refusal code as the reason.
  const decided = await ch.query(
    sql`SELECT event_id, decision, reason, shadow FROM ${t('decisions_v2')}`,
  );
  expect(sorted(decided.map((r) => [r.event_id, r.decision, r.reason, num(r.shadow)]))).toEqual(
    sorted(
      rows
        .filter((r) => r.type === 'reservation.created' || r.type === 'admission.refused')
        .map((r) => [r.id, r.type === 'admission.refused' ? 'refuse' : 'admit', r.code, r.shadow]),
    ),
  );
  const refusals = await ch.query(
    sql`SELECT reason, shadow, sum(refusals) AS n FROM ${t('refusals_by_reason_v1')} GROUP BY reason, shadow ORDER BY reason, shadow`,
  );
  expect(refusals.map((r) => [r.reason, num(r.shadow), num(r.n)])).toEqual([
    ['budget_exceeded', 0, 1],
    ['budget_exceeded', 1, 1],
    ['concurrency_limit', 0, 1],
  ]);

  // One state per (event, window), the window's figures as the event carried them.
  const states = await ch.query(
    sql`SELECT event_id, level, budget, used, held, budget_limit FROM ${t('window_states_v2')}`,
  );
  expect(
    sorted(
      states.map((r) => [
        r.event_id,
        r.level,
        r.budget,
        num(r.used),
        num(r.held),
        num(r.budget_limit),
      ]),
    ),
  ).toEqual(
    sorted(
      rows.flatMap((r) =>
        r.w_level.map((level, i) => [
          r.id,
          level,
          r.w_budget[i],
          r.w_used[i],
          r.w_held[i],
          r.w_limit[i],
        ]),
      ),
    ),
  );
  const util = await ch.query(
    sql`SELECT level, budget, used_now, held_now, limit_now, utilisation FROM ${t('budget_utilisation_v1')} ORDER BY level`,
  );
  expect(util.map((r) => [r.level, r.budget, num(r.used_now), num(r.limit_now)])).toEqual([
    ['team-a', 'month-tokens', 39_790, 1_000_000],
    // team-b's last event is its settlement two hours in (its refusal came earlier).
    ['team-b', 'month-tokens', 330, 1_000_000],
  ]);
  const peak = await ch.query(
    sql`SELECT max(utilisation_peak) AS p, sum(events) AS n FROM ${t('budget_utilisation_hourly_v1')}`,
  );
  expect(num(peak[0]?.n)).toBe(events.length);

  // top_spenders_v1 covers the last 30 days of wall time; the contract events are dated.
  await ch.query(sql`SELECT * FROM ${t('top_spenders_v1')} LIMIT 10`);

  // The drift audit's queries run and sum charged amounts once per event: per tenant for
  // lifetime, per window (org, level, budget) since each bound.
  const now = Date.UTC(2026, 10, 30, 12);
  const sums = await clickhouseSums(ch, database, now);
  expect(sums.map((s) => [s.tenant, s.org, s.lifetimeTokens])).toEqual([
    ['team-a', 'acme', 330],
    ['team-b', 'acme', 330],
  ]);
  const windows = await windowSums(ch, database, now);
  expect(windows.map((w) => [w.org, w.level, w.budget, w.since.day, w.since.minute])).toEqual([
    ['acme', 'team-a', 'month-tokens', 330, 0],
    ['acme', 'team-b', 'month-tokens', 330, 0],
  ]);

  await usageByApiContract(ch, database);

  // Hostile strings go in as literals and come back unchanged.
  for (const s of HOSTILE_STRINGS) {
    const [row] = await ch.query(sql`SELECT ${s} AS v, length(${s}) AS n`);
    expect(row?.v).toBe(s);
    expect(num(row?.n)).toBe(Buffer.byteLength(s));
  }
  await ch.command(
    sql`INSERT INTO ${t('events_raw_v1')} (id, tenant, ts, extra) VALUES (${'hostile'}, ${HOSTILE_STRINGS[1]!}, 0, ${HOSTILE_STRINGS.join('|')})`,
  );
  const [back] = await ch.query(
    sql`SELECT extra FROM ${t('events_raw_v1')} WHERE id = ${'hostile'} AND tenant = ${HOSTILE_STRINGS[1]!}`,
  );
  expect(back?.extra).toBe(HOSTILE_STRINGS.join('|'));
}

/** Runs an applied migration again under an unused version number; returns what applied. */
async function rerunAsNew(ch: SqlExecutor, database: string, file: string): Promise<string[]> {
  const dir = await mkdtemp(join(tmpdir(), 'holdfast-rerun-'));
  try {
    const name = file.replace(/^\d{3}/, '999');
    await copyFile(new URL(`../migrations/${file}`, import.meta.url), join(dir, name));
    const url = pathToFileURL(`${dir}/`);
    return (await migrate({ ch, database, logger: silent, dir: url })).applied;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Per surface, with every token category (migrations 011, 012): a Messages call with cache
 * reads, writes and reasoning, and a Responses call, each in its own row of the by-api views.
 */
async function usageByApiContract(ch: SqlExecutor, database: string): Promise<void> {
  const t = (name: string): Sql => qualified(database, name);
  const at = Date.UTC(2026, 10, 30, 15, 0);
  const parts = { cached: 200, cacheWrite5m: 300, cacheWrite1h: 100, reasoning: 120 };
  const events = [
    ...settledCall({
      tenant: 'team-c',
      atMs: at,
      api: 'messages',
      prompt: 1_000,
      completion: 300,
      parts,
    }),
    ...settledCall({ tenant: 'team-c', atMs: at, api: 'responses', prompt: 50, completion: 5 }),
  ];
  await ch.insert(
    t('events_raw_v1'),
    events.map((e, i) => toEventRow(e, 100 + i)),
  );
  const hourly = await ch.query(
    sql`SELECT api, calls, prompt_tokens_total AS p, cached_prompt_tokens_total AS c, cache_write_5m_tokens_total AS w5, cache_write_1h_tokens_total AS w1, completion_tokens_total AS o, reasoning_tokens_total AS r, tokens FROM ${t('usage_by_api_hourly_v1')} WHERE tenant = 'team-c' ORDER BY api`,
  );
  expect(hourly.map((r) => Object.values(r).map((v, i) => (i === 0 ? v : num(v))))).toEqual([
    ['messages', 1, 1_000, 200, 300, 100, 300, 120, 1_300],
    ['responses', 1, 50, 0, 0, 0, 5, 0, 55],
  ]);
  const daily = await ch.query(
    sql`SELECT api, sum(cache_write_1h_tokens_day) AS w1, sum(tokens_day) AS tokens FROM ${t('usage_by_api_daily_v1')} WHERE tenant = 'team-c' GROUP BY api ORDER BY api`,
  );
  expect(daily.map((r) => [r.api, num(r.w1), num(r.tokens)])).toEqual([
    ['messages', 100, 1_300],
    ['responses', 0, 55],
  ]);
}

/**
 * RowBinary (the aggregator's insert body) stores exactly what JSONEachRow stores: the same
 * rows through both into two tables of the same schema, read back equal. The rows reach the
 * encoder's edges: hostile and multi-byte strings, strings over 127 bytes (two-byte lengths),
 * negative Int64, UInt64 up to 2^53 - 1, empty and long arrays.
 */
export async function runRowBinaryContract(ch: SqlExecutor, database: string): Promise<void> {
  const logger = createLogger({ name: 'test', level: 'silent' });
  await migrate({ ch, database, logger });
  const json = qualified(database, 'events_raw_v1');
  const binary = qualified(database, 'events_rowbinary_check');
  await ch.command(sql`CREATE TABLE IF NOT EXISTS ${binary} AS ${json}`);

  const rows = contractEvents().map((e, i) => toEventRow(e, i + 1));
  const edges = HOSTILE_STRINGS.map((s, i) => ({
    ...rows[i % rows.length]!,
    id: `edge-${i}`,
    reason: s,
    extra: `${s}|${'é'.repeat(100)}|${'x'.repeat(300)}`,
    model: s.slice(0, 20),
    charged_tokens: -(2 ** 53 - 1) + i,
    charged_micro_usd: -1,
    held_micro_usd: 2 ** 53 - 1,
    time_ms: 2 ** 40 + i,
    w_level: Array.from({ length: i * 20 }, (_, k) => `${s}${k}`),
    w_budget: Array.from({ length: i * 20 }, () => 'month-tokens'),
    w_window: Array.from({ length: i * 20 }, () => 'month'),
    w_unit: Array.from({ length: i * 20 }, () => 'tokens'),
    w_limit: Array.from({ length: i * 20 }, (_, k) => 2 ** 32 + k),
    w_used: Array.from({ length: i * 20 }, (_, k) => -k),
    w_held: Array.from({ length: i * 20 }, (_, k) => k),
    w_enforce: Array.from({ length: i * 20 }, (_, k) => k % 2),
  }));
  const all = [...rows, ...edges];
  for (const row of all) expect(rowProblem(row)).toBeUndefined();

  await ch.insert(json, all);
  const encoder = new RowBinaryEncoder();
  await ch.insertRowBinary(
    binary,
    EVENTS_RAW_COLUMNS.map(([c]) => c),
    Buffer.concat(all.map((r) => writeEventRow(encoder, r))),
  );
  const read = (t: Sql) => ch.query(sql`SELECT * FROM ${t} ORDER BY id`);
  const [viaJson, viaBinary] = [await read(json), await read(binary)];
  expect(viaBinary).toHaveLength(all.length);
  expect(viaBinary).toEqual(viaJson);
}

/** Every row of a table or view, as sorted JSON (an order-free comparison). */
async function snapshot(ch: SqlExecutor, from: Sql): Promise<string[]> {
  return sorted((await ch.query(sql`SELECT * FROM ${from}`)).map((r) => Object.values(r)));
}

/**
 * The upgrade to migration 009 on a database that ran 001-008 and holds events: the
 * decisions and window states read from the new views equal what the old tables (fed by
 * materialized views at insert) held, the views built on them answer the same, the old
 * tables and materialized views are gone, and events inserted afterwards show up.
 */
export async function runViewsUpgradeContract(ch: SqlExecutor, database: string): Promise<void> {
  const logger = createLogger({ name: 'test', level: 'silent' });
  await migrateUpTo(ch, database, '009');
  const t = (name: string): Sql => qualified(database, name);
  // Rows as the aggregator wrote them then: without the columns migrations 011, 013, 015, 016, 017, 018, 019, 021 add.
  const rows = contractEvents().map((e, i) => {
    const {
      api: _a,
      cache_write_5m_tokens: _w5,
      cache_write_1h_tokens: _w1,
      reasoning_tokens: _r,
      end_user: _eu,
      upstream: _up,
      audio_prompt_tokens: _ap,
      audio_completion_tokens: _ac,
      service_tier: _st,
      long_context: _lc,
      tool_uses: _tu,
      tool_fee_micro_usd: _tf,
      w_charged: _wc,
      w_removed: _wr,
      ...row
    } = toEventRow(e, i + 1);
    return row;
  });
  await ch.insert(t('events_raw_v1'), rows);
  await ch.insert(t('events_raw_v1'), rows);
  const before = {
    decisions: await snapshot(ch, sql`${t('decisions_v1')} FINAL`),
    states: await snapshot(ch, sql`${t('window_states_v1')} FINAL`),
    refusals: await snapshot(ch, t('refusals_by_reason_v1')),
    utilisation: await snapshot(ch, t('budget_utilisation_v1')),
    hourly: await snapshot(ch, t('budget_utilisation_hourly_v1')),
  };
  expect(before.decisions.length).toBeGreaterThan(0);
  expect(before.states.length).toBeGreaterThan(0);

  const upgrade = await migrate({ ch, database, logger });
  expect(upgrade.applied[0]).toBe('009_create_decisions_and_window_states_views_v2');
  expect({
    decisions: await snapshot(ch, t('decisions_v2')),
    // The columns window_states_v1 had (020 adds `charged`).
    states: await snapshot(
      ch,
      sql`(SELECT event_id, event_type, ts, time_ms, tenant, level, budget, budget_window, budget_unit, budget_limit, used, held, enforce FROM ${t('window_states_v2')})`,
    ),
    refusals: await snapshot(ch, t('refusals_by_reason_v1')),
    utilisation: await snapshot(ch, t('budget_utilisation_v1')),
    hourly: await snapshot(ch, t('budget_utilisation_hourly_v1')),
  }).toEqual(before);

  // Rows written before 011 read with the added columns' zeros.
  const added = await ch.query(
    sql`SELECT DISTINCT api, cache_write_5m_tokens AS w5, reasoning_tokens AS r FROM ${t('events_raw_v1')} FINAL`,
  );
  expect(added.map((r) => [r.api, num(r.w5), num(r.r)])).toEqual([['', 0, 0]]);

  const gone = await ch.query(
    sql`SELECT name FROM system.tables WHERE database = ${database} AND name IN ${tuple([
      'decisions_v1',
      'window_states_v1',
      'decisions_mv_v1',
      'window_states_mv_v1',
    ])}`,
  );
  expect(gone).toEqual([]);

  // After the upgrade an insert reaches the views with no materialized view in between.
  const [later] = contractEvents().filter((e) => e.type === 'admission.refused');
  await ch.insert(t('events_raw_v1'), [{ ...toEventRow(later!, 99), id: 'evt_after_upgrade' }]);
  const [n] = await ch.query(
    sql`SELECT count() AS n FROM ${t('decisions_v2')} WHERE event_id = 'evt_after_upgrade'`,
  );
  expect(num(n?.n)).toBe(1);
}
