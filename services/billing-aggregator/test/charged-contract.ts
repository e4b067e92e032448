import { randomUUID } from 'node:crypto';
import { HoldfastEvent, type EventOf } from '@holdfast/events';
import { createLogger } from '@holdfast/runtime';
import { expect } from 'vitest';
import type { SqlExecutor } from '../src/clickhouse.js';
import { migrate } from '../src/migrate.js';
import { toEventRow } from '../src/rows.js';
import { qualified, sql } from '../src/sql.js';
import { refusal, settledCall } from './events.js';

/**
 * Migration 010, run on ClickHouse 18.16 and on current ClickHouse: the usage views sum what
 * the windows were charged (an expired reserve hold billed at its worst case, then corrected
 * by a late settle), refusals sum their `count`, overruns_v1 sums the excess.
 */
export async function runChargedViewsContract(ch: SqlExecutor, database: string): Promise<void> {
  await migrate({ ch, database, logger: createLogger({ name: 'test', level: 'silent' }) });
  const t = (name: string) => qualified(database, name);
  const at = Date.UTC(2026, 10, 30, 9, 15);
  const [created] = settledCall({ tenant: 'team-a', org: 'acme', atMs: at, prompt: 100 });
  const call = {
    reservationId: created.reservationId,
    keyId: created.keyId,
    useCase: created.useCase,
    model: created.model,
    mode: created.mode,
  };
  const envelope = (type: string, ms: number) => ({
    id: randomUUID(),
    schemaVersion: 1,
    time: new Date(ms).toISOString(),
    tenant: 'team-a',
    org: 'acme',
    type,
  });
  // Held 1,124 (100 + 1,024); its edge died: expired and billed the worst case ...
  const expired = HoldfastEvent.parse({
    ...envelope('reservation.expired', at + 1_800_000),
    ...call,
    heldTokens: 1_124,
    heldMicroUsd: 1_124,
    chargedTokens: 1_124,
    chargedMicroUsd: 1_124,
    leaseMs: 1_800_000,
    windows: [],
  });
  // ... then its settle arrived: it used 150, so the window gets 974 back.
  const late = HoldfastEvent.parse({
    ...envelope('reservation.settled', at + 1_800_500),
    ...call,
    heldTokens: 1_124,
    heldMicroUsd: 1_124,
    promptTokens: 100,
    completionTokens: 50,
    cachedPromptTokens: 0,
    billedTokens: 150,
    costMicroUsd: 150,
    chargedTokens: -974,
    chargedMicroUsd: -974,
    outcome: 'completed',
    durationMs: 1_800_500,
    windows: [],
  });
  const summary = { ...refusal({ tenant: 'team-a', org: 'acme', atMs: at }), count: 7 };
  const overrun = HoldfastEvent.parse({
    ...envelope('reservation.overrun', at + 60_000),
    ...call,
    reservationId: randomUUID(),
    heldTokens: 200,
    heldMicroUsd: 200,
    billedTokens: 260,
    costMicroUsd: 270,
    overrunTokens: 60,
    overrunMicroUsd: 70,
    windows: [],
  }) as EventOf<'reservation.overrun'>;
  const events = [created, expired, late, summary, overrun] as HoldfastEvent[];
  await ch.insert(
    t('events_raw_v1'),
    events.map((e, i) => toEventRow(e, i + 1)),
  );

  const [usage] = await ch.query(
    sql`SELECT sum(tokens) AS tokens, sum(calls) AS calls, sum(expired) AS expired FROM ${t('usage_hourly_v1')}`,
  );
  expect([Number(usage?.tokens), Number(usage?.calls), Number(usage?.expired)]).toEqual([
    150, 1, 1,
  ]);
  const [daily] = await ch.query(sql`SELECT sum(tokens_day) AS tokens FROM ${t('usage_daily_v1')}`);
  expect(Number(daily?.tokens)).toBe(150);
  const [refused] = await ch.query(
    sql`SELECT sum(refusals) AS n FROM ${t('refusals_by_reason_v1')}`,
  );
  expect(Number(refused?.n)).toBe(7);
  const [over] = await ch.query(
    sql`SELECT sum(overruns) AS n, sum(overrun_tokens) AS t, sum(overrun_micro_usd) AS u FROM ${t('overruns_v1')}`,
  );
  expect([Number(over?.n), Number(over?.t), Number(over?.u)]).toEqual([1, 60, 70]);
}
