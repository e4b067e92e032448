import { HoldfastEvent } from '@holdfast/events';
import { createLogger } from '@holdfast/runtime';
import { expect } from 'vitest';
import type { SqlExecutor } from '../src/clickhouse.js';
import { migrate } from '../src/migrate.js';
import { toEventRow } from '../src/rows.js';
import { qualified, sql } from '../src/sql.js';
import { settledCall } from './events.js';

/**
 * Migrations 016 and 017, run on ClickHouse 18.16 and on current ClickHouse: the tier a
 * settlement billed and a hold was held at reach `service_tier`, and whether either was
 * priced long `long_context`; a settlement from before tiers reads `default` and 0, and the
 * migrations run again unchanged.
 */
export async function runTierContract(ch: SqlExecutor, database: string): Promise<void> {
  const logger = createLogger({ name: 'test', level: 'silent' });
  await migrate({ ch, database, logger });
  const t = qualified(database, 'events_raw_v1');
  const at = Date.UTC(2026, 11, 2, 14, 0);
  const [created, priority] = settledCall({ tenant: 'fast', atMs: at });
  const [, old] = settledCall({ tenant: 'fast', atMs: at + 1_000 });
  const rows = [
    HoldfastEvent.parse({ ...created, serviceTier: 'priority', longContext: true }),
    HoldfastEvent.parse({
      ...priority,
      serviceTier: 'priority',
      costMicroUsd: 10_050,
      longContext: true,
    }),
    HoldfastEvent.parse(old),
  ].map((e, i) => toEventRow(e, i + 1));
  await ch.insert(t, rows);
  await migrate({ ch, database, logger });

  const got = await ch.query<Record<string, string | number>>(
    sql`SELECT type, service_tier, cost_micro_usd, long_context FROM ${t} FINAL ORDER BY stream_seq`,
  );
  expect(
    got.map((r) => [r.type, r.service_tier, Number(r.cost_micro_usd), Number(r.long_context)]),
  ).toEqual([
    ['reservation.created', 'priority', 0, 1],
    ['reservation.settled', 'priority', 10_050, 1],
    ['reservation.settled', 'default', 882, 0],
  ]);
}
