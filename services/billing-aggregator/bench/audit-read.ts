/**
 * Benchmark: the drift audit's per-window read (audit.ts windowSums: events_raw_v1 FINAL, the
 * window indexes joined, its own rule for a window's charge) against the same sums read from
 * window_states_v2's `charged` (migration 020), the one other place that rule is written.
 * Both leave out `org` (the view has none) and sum since each sliding bound.
 *
 *   pnpm --filter @holdfast/billing-aggregator bench:audit-read
 *
 * Env: BENCH_EVENTS (default 100,000 inside the last three days), BENCH_OLD (default 300,000,
 * 70 days old: history outside every window), CLICKHOUSE_URL (else a local clickhouse-server
 * is started on a free port). Each event lists four windows. The reads alternate, ten rounds;
 * the medians are printed (docs/clickhouse.md, drift audit, has the figures).
 */
import { randomUUID } from 'node:crypto';
import { createLogger } from '@holdfast/runtime';
import type { SqlExecutor } from '../src/clickhouse.js';
import { benchClickHouse } from './clickhouse.js';
import { boundsAt } from '../src/audit.js';
import { migrate } from '../src/migrate.js';
import { RowBinaryEncoder } from '../src/rowbinary.js';
import { toEventRow, writeEventRow } from '../src/rows.js';
import { ident, qualified, sql, tuple, type Sql } from '../src/sql.js';
import { createEventsWriter } from '../src/writer.js';
import { settledCall } from '../test/events.js';
import { testClickHouse } from '../test/harness.js';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 100_000);
const OLD = Number(process.env.BENCH_OLD ?? 300_000);
const BATCH = 25_000;
const MOVING = ['reservation.created', 'reservation.settled', 'reservation.released'];
const logger = createLogger({ name: 'bench', level: 'warn' });

/** Stores `n` events (created + settled pairs, four windows each) from `daysAgo` on. */
async function fill(ch: SqlExecutor, database: string, n: number, daysAgo: number) {
  const writer = createEventsWriter({ ch, database });
  const encoder = new RowBinaryEncoder();
  const start = Date.now() - daysAgo * 86_400_000;
  for (let done = 0; done < n; done += BATCH) {
    const rows: Uint8Array[] = [];
    for (let i = done; i < Math.min(done + BATCH, n); i += 2) {
      for (const e of settledCall({ tenant: `team-${(i / 2) % 20}`, atMs: start + i * 2_000 })) {
        const w = e.windows[0]!;
        e.windows = [
          w,
          { ...w, budget: 'day-tokens', window: 'day' },
          { ...w, budget: 'minute-tokens', window: 'minute' },
          { ...w, budget: 'month-usd', unit: 'usd' },
        ];
        rows.push(writeEventRow(encoder, { ...toEventRow(e, i), id: randomUUID() }));
      }
    }
    const out = await writer.write(rows);
    if (!out.ok) throw out.error;
  }
}

async function main(): Promise<void> {
  const { url, server } = await benchClickHouse();
  const ch = testClickHouse(url);
  const db = `bench_audit_${Date.now().toString(36)}`;
  try {
    await migrate({ ch, database: db, logger });
    await fill(ch, db, EVENTS, 3);
    if (OLD > 0) await fill(ch, db, OLD, 70);
    await ch.command(sql`OPTIMIZE TABLE ${qualified(db, 'events_raw_v1')} FINAL`);
    const now = Date.now();
    const b = boundsAt(now);
    const inRange = sql`IN ${tuple(MOVING)} AND time_ms >= ${b.month} AND time_ms <= ${now}`;
    const sums = (from: Sql) => sql`
      SELECT level, budget,
        sumIf(charge, time_ms >= ${b.minute}) AS minute,
        sumIf(charge, time_ms >= ${b.day}) AS day,
        sumIf(charge, time_ms >= ${b.month}) AS month
      FROM (${from}) GROUP BY level, budget ORDER BY level, budget`;
    const reads: Array<[string, Sql]> = [
      [
        'events_raw_v1 (the audit)',
        sums(sql`
          SELECT time_ms, w_level[n] AS level, w_budget[n] AS budget,
            if(length(w_charged) = 0, if(w_unit[n] = 'usd', charged_micro_usd, charged_tokens),
              w_charged[n]) AS charge
          FROM ${qualified(db, 'events_raw_v1')} FINAL
          ARRAY JOIN arrayEnumerate(w_budget) AS n
          WHERE type ${inRange}`),
      ],
      [
        'window_states_v2.charged',
        sums(sql`
          SELECT time_ms, level, budget, charged AS charge
          FROM ${qualified(db, 'window_states_v2')}
          WHERE event_type ${inRange}`),
      ],
    ];
    const [first, second] = await Promise.all(reads.map(([, q]) => ch.query(q)));
    if (JSON.stringify(first) !== JSON.stringify(second)) throw new Error('the sums differ');
    const ms = new Map<string, number[]>();
    for (let round = 0; round < 10; round++) {
      for (const [name, q] of reads) {
        const t = performance.now();
        await ch.query(q);
        ms.set(name, [...(ms.get(name) ?? []), performance.now() - t]);
      }
    }
    console.log(`${EVENTS.toLocaleString('en-US')} events in the windows, ${OLD} older`);
    for (const [name, xs] of ms) {
      const sorted = [...xs].sort((x, y) => x - y);
      const all = xs.map((x) => x.toFixed(0)).join(' ');
      console.log(`  ${name.padEnd(28)} median ${sorted[5]!.toFixed(0)} ms (${all})`);
    }
  } finally {
    await ch.command(sql`DROP DATABASE IF EXISTS ${ident(db)}`);
    await ch.close();
    await server?.stop();
  }
}

await main();
