import { HoldfastEvent } from '@holdfast/events';
import { createLogger } from '@holdfast/runtime';
import { expect } from 'vitest';
import type { SqlExecutor } from '../src/clickhouse.js';
import { migrate } from '../src/migrate.js';
import { toEventRow } from '../src/rows.js';
import { qualified, sql } from '../src/sql.js';
import { settledCall } from './events.js';

/**
 * Migration 016, run on ClickHouse 18.16 and on current ClickHouse: the tier a settlement
 * billed and a hold was held at reach `service_tier`, a settlement from before tiers reads
 * `default`, a refusal '', and the migration runs again unchanged.
 */
export async function runTierContract(ch: SqlExecutor, database: string): Promise<void> {
  const logger = createLogger({ name: 'test', level: 'silent' });
  await migrate({ ch, database, logger });
  const t = qualified(database, 'events_raw_v1');
  const at = Date.UTC(2026, 11, 2, 14, 0);
  const [created, priority] = settledCall({ tenant: 'fast', atMs: at });
  const [, old] = settledCall({ tenant: 'fast', atMs: at + 1_000 });
  const rows = [
    HoldfastEvent.parse({ ...created, serviceTier: 'priority' }),
    HoldfastEvent.parse({ ...priority, serviceTier: 'priority', costMicroUsd: 10_050 }),
    HoldfastEvent.parse(old),
  ].map((e, i) => toEventRow(e, i + 1));
  await ch.insert(t, rows);
  await migrate({ ch, database, logger });

  const got = await ch.query<Record<string, string | number>>(
    sql`SELECT type, service_tier, cost_micro_usd FROM ${t} FINAL ORDER BY stream_seq`,
  );
  expect(got.map((r) => [r.type, r.service_tier, Number(r.cost_micro_usd)])).toEqual([
    ['reservation.created', 'priority', 0],
    ['reservation.settled', 'priority', 10_050],
    ['reservation.settled', 'default', 882],
  ]);
}
