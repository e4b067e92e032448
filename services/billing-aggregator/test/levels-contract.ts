import { HoldfastEvent, type WindowState } from '@holdfast/events';
import { createLogger } from '@holdfast/runtime';
import { expect } from 'vitest';
import type { SqlExecutor } from '../src/clickhouse.js';
import { migrate } from '../src/migrate.js';
import { toEventRow } from '../src/rows.js';
import { qualified, sql } from '../src/sql.js';
import { refusal, settledCall } from './events.js';

/**
 * Migrations 013 and 014, run on ClickHouse 18.16 and on current ClickHouse: the end user and
 * the upstream of a call reach their columns, a key's and an end user's windows get their own
 * `budget_utilisation_v1` rows (their w_level names whose they are), and
 * upstream_capacity_hourly_v1 sums what each tenant reserved on an upstream and who was shed.
 */
export async function runLevelsContract(ch: SqlExecutor, database: string): Promise<void> {
  await migrate({ ch, database, logger: createLogger({ name: 'test', level: 'silent' }) });
  const t = (name: string) => qualified(database, name);
  const at = Date.UTC(2026, 11, 1, 9, 15);
  const w = (over: Partial<WindowState>): WindowState => ({
    tenant: 'apps',
    budget: 'day-tokens',
    window: 'day',
    unit: 'tokens',
    limit: 10_000,
    used: 0,
    held: 0,
    enforce: true,
    ...over,
  });
  const [created, settled] = settledCall({ tenant: 'apps', atMs: at, prompt: 100, completion: 50 });
  const windows = [
    w({ used: 5_000 }),
    w({ used: 150, scope: 'key', subject: 'app-a' }),
    w({ used: 150, scope: 'end_user', subject: 'alice' }),
  ];
  const withUser = (e: HoldfastEvent, extra: Record<string, unknown> = {}) =>
    HoldfastEvent.parse({ ...e, endUser: 'alice', windows, ...extra });
  const shed = HoldfastEvent.parse({
    ...refusal({ tenant: 'apps', atMs: at + 1_000, code: 'upstream_capacity' }),
    upstream: 'openai-main',
    count: 4,
  });
  const events = [
    withUser(created, { upstream: 'openai-main' }),
    withUser(settled),
    shed,
    refusal({ tenant: 'apps', atMs: at + 2_000 }),
  ];
  await ch.insert(
    t('events_raw_v1'),
    events.map((e, i) => toEventRow(e, i + 1)),
  );

  const users = await ch.query<{ end_user: string; upstream: string; type: string }>(
    sql`SELECT end_user, upstream, type FROM ${t('events_raw_v1')} FINAL ORDER BY time_ms, type`,
  );
  expect(users.map((r) => [r.type, r.end_user, r.upstream])).toEqual([
    ['reservation.created', 'alice', 'openai-main'],
    ['reservation.settled', 'alice', ''],
    ['admission.refused', '', 'openai-main'],
    ['admission.refused', '', ''],
  ]);
  const states = await ch.query<{ level: string; used: string }>(
    sql`SELECT level, used_now AS used FROM ${t('budget_utilisation_v1')} WHERE budget = 'day-tokens' ORDER BY level`,
  );
  expect(states.map((r) => [r.level, Number(r.used)])).toEqual([
    ['apps', 5_000],
    ['apps/key:app-a', 150],
    ['apps/user:alice', 150],
  ]);
  const capacity = await ch.query<Record<string, string>>(
    sql`SELECT upstream, tenant, admitted, reserved_tokens, shed FROM ${t('upstream_capacity_hourly_v1')}`,
  );
  expect(
    capacity.map((r) => [
      r.upstream,
      r.tenant,
      Number(r.admitted),
      Number(r.reserved_tokens),
      Number(r.shed),
    ]),
  ).toEqual([['openai-main', 'apps', 1, created.heldTokens, 4]]);
}
