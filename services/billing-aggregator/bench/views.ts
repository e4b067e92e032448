/**
 * Benchmark: how long the dashboard views take to read with 1,000,000 events stored, on the
 * current schema and on the schema as of migration 008 (decisions and window states still
 * tables fed by materialized views at insert). Migration 009 moved that work from every
 * insert to every read; this prints what the reads pay.
 *
 *   pnpm --filter @holdfast/billing-aggregator bench:views   (also the second half of its `bench`)
 *
 * Env: BENCH_EVENTS (default 1,000,000; half reservation.created, half reservation.settled,
 * 20 tenants, spread over three days), CLICKHOUSE_URL (else a local clickhouse-server is
 * started on a free port). Each query runs three times; all three times are printed.
 */
import { randomUUID } from 'node:crypto';
import { createLogger } from '@holdfast/runtime';
import type { SqlExecutor } from '../src/clickhouse.js';
import { benchClickHouse } from './clickhouse.js';
import { migrate } from '../src/migrate.js';
import { RowBinaryEncoder } from '../src/rowbinary.js';
import { toEventRow, writeEventRow } from '../src/rows.js';
import { ident, qualified, raw, sql, type Sql } from '../src/sql.js';
import { createEventsWriter } from '../src/writer.js';
import { settledCall } from '../test/events.js';
import { migrateUpTo, testClickHouse } from '../test/harness.js';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 1_000_000);
const BATCH = 25_000;
const logger = createLogger({ name: 'bench', level: 'warn' });

/** Stores `n` events (created + settled pairs) through the aggregator's own writer. */
async function fill(ch: SqlExecutor, database: string, n: number): Promise<void> {
  const writer = createEventsWriter({ ch, database });
  const encoder = new RowBinaryEncoder();
  const start = Date.now() - 3 * 86_400_000;
  for (let done = 0; done < n; done += BATCH) {
    const rows: Uint8Array[] = [];
    for (let i = done; i < Math.min(done + BATCH, n); i += 2) {
      const call = settledCall({ tenant: `team-${(i / 2) % 20}`, atMs: start + i * 250 });
      for (const e of call)
        rows.push(writeEventRow(encoder, { ...toEventRow(e, i), id: randomUUID() }));
    }
    const out = await writer.write(rows);
    if (!out.ok) throw out.error;
  }
}

/**
 * The same events in the schema as of 008: the columns its events_raw_v1 has (today's rows
 * have more), copied from `from`; its materialized views are fed as by any insert.
 */
async function copyEvents(ch: SqlExecutor, from: string, to: string): Promise<void> {
  const columns = await ch.query<{ name: string }>(
    sql`SELECT name FROM system.columns WHERE database = ${to} AND table = 'events_raw_v1' AND default_kind NOT IN ('MATERIALIZED', 'ALIAS')`,
  );
  const list = raw(columns.map((c) => ident(c.name).text).join(', '));
  const [source, target] = [qualified(from, 'events_raw_v1'), qualified(to, 'events_raw_v1')];
  await ch.command(sql`INSERT INTO ${target} (${list}) SELECT ${list} FROM ${source}`);
  const count = (t: Sql) => ch.query<{ n: string }>(sql`SELECT count() AS n FROM ${t}`);
  const [a, b] = [await count(source), await count(target)];
  if (a[0]?.n !== b[0]?.n) throw new Error(`copied ${b[0]?.n} of ${a[0]?.n} events`);
}

async function timed(ch: SqlExecutor, q: Sql): Promise<string> {
  const ms: number[] = [];
  for (let i = 0; i < 3; i++) {
    const t = performance.now();
    await ch.query(q);
    ms.push(performance.now() - t);
  }
  return ms.map((m) => `${m.toFixed(0)}`).join(' / ') + ' ms';
}

async function main(): Promise<void> {
  const { url, server } = await benchClickHouse();
  const ch = testClickHouse(url);
  const tag = Date.now().toString(36);
  const before = `bench_views_008_${tag}`;
  const now = `bench_views_${tag}`;
  try {
    await migrateUpTo(ch, before, '009');
    await migrate({ ch, database: now, logger });
    await fill(ch, now, EVENTS);
    await copyEvents(ch, now, before);
    const b = (t: string) => qualified(before, t);
    const c = (t: string) => qualified(now, t);
    const admitsPerHour = (from: Sql) =>
      sql`SELECT toStartOfHour(ts) AS h, countIf(decision = 'admit') AS admits FROM ${from} GROUP BY h`;
    console.log(`billing-aggregator views bench: ${EVENTS.toLocaleString('en-US')} events stored`);
    const rows: Array<[string, Sql, Sql]> = [
      [
        'admits per hour',
        admitsPerHour(sql`${b('decisions_v1')} FINAL`),
        admitsPerHour(c('decisions_v2')),
      ],
      [
        'budget_utilisation_v1',
        sql`SELECT * FROM ${b('budget_utilisation_v1')}`,
        sql`SELECT * FROM ${c('budget_utilisation_v1')}`,
      ],
      [
        'budget_utilisation_hourly_v1',
        sql`SELECT * FROM ${b('budget_utilisation_hourly_v1')}`,
        sql`SELECT * FROM ${c('budget_utilisation_hourly_v1')}`,
      ],
      [
        'refusals_by_reason_v1',
        sql`SELECT * FROM ${b('refusals_by_reason_v1')}`,
        sql`SELECT * FROM ${c('refusals_by_reason_v1')}`,
      ],
    ];
    for (const [name, old, current] of rows) {
      console.log(
        `  ${name.padEnd(30)} as of 008 ${await timed(ch, old)}; now ${await timed(ch, current)}`,
      );
    }
    for (const view of ['usage_hourly_v1', 'usage_daily_v1', 'top_spenders_v1']) {
      console.log(
        `  ${view.padEnd(30)} ${await timed(ch, sql`SELECT * FROM ${c(view)}`)} (unchanged by 009)`,
      );
    }
  } finally {
    for (const db of [before, now]) await ch.command(sql`DROP DATABASE IF EXISTS ${ident(db)}`);
    await ch.close();
    await server?.stop();
  }
}

await main();
