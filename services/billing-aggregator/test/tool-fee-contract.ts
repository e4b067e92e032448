import { HoldfastEvent } from '@holdfast/events';
import { createLogger } from '@holdfast/runtime';
import { expect } from 'vitest';
import type { SqlExecutor } from '../src/clickhouse.js';
import { migrate } from '../src/migrate.js';
import { toEventRow } from '../src/rows.js';
import { qualified, sql } from '../src/sql.js';
import { settledCall } from './events.js';

/**
 * Migration 018, run on ClickHouse 18.16 and on current ClickHouse: the provider-run tool uses
 * a settlement billed and their fee reach `tool_uses` and `tool_fee_micro_usd` (the fee a part
 * of `cost_micro_usd`); a settlement without them and a hold read 0, and the migration runs
 * again unchanged.
 */
export async function runToolFeeContract(ch: SqlExecutor, database: string): Promise<void> {
  const logger = createLogger({ name: 'test', level: 'silent' });
  await migrate({ ch, database, logger });
  const t = qualified(database, 'events_raw_v1');
  const at = Date.UTC(2026, 11, 3, 14, 0);
  const [created, searched] = settledCall({ tenant: 'fast', atMs: at });
  const [, plain] = settledCall({ tenant: 'fast', atMs: at + 1_000 });
  const rows = [
    HoldfastEvent.parse(created),
    HoldfastEvent.parse({
      ...searched,
      costMicroUsd: 30_882,
      toolUses: 3,
      toolFeeMicroUsd: 30_000,
    }),
    HoldfastEvent.parse(plain),
  ].map((e, i) => toEventRow(e, i + 1));
  await ch.insert(t, rows);
  await migrate({ ch, database, logger });

  const got = await ch.query<Record<string, string | number>>(
    sql`SELECT type, cost_micro_usd, tool_uses, tool_fee_micro_usd FROM ${t} FINAL ORDER BY stream_seq`,
  );
  expect(
    got.map((r) => [
      r.type,
      Number(r.cost_micro_usd),
      Number(r.tool_uses),
      Number(r.tool_fee_micro_usd),
    ]),
  ).toEqual([
    ['reservation.created', 0, 0, 0],
    ['reservation.settled', 30_882, 3, 30_000],
    ['reservation.settled', 882, 0, 0],
  ]);
  const [sum] = await ch.query<Record<string, string | number>>(
    sql`SELECT sum(tool_fee_micro_usd) AS fees, sum(tool_uses) AS uses FROM ${t} FINAL`,
  );
  expect([Number(sum?.fees), Number(sum?.uses)]).toEqual([30_000, 3]);
}
