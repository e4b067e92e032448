import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { natsNamesToEnv } from '@holdfast/config';
import type { HoldfastEvent, NatsNames } from '@holdfast/events';
import { createLogger, type Logger } from '@holdfast/runtime';
import type { Registry } from 'prom-client';
import { createClickHouse, type SqlExecutor } from '../src/clickhouse.js';
import { loadConfig, type AggregatorConfig } from '../src/env.js';
import { migrate } from '../src/migrate.js';
import { qualified, sql } from '../src/sql.js';
import { settledCall } from './events.js';

export const silent: Logger = createLogger({
  name: 'test',
  level: process.env.TEST_LOG_LEVEL ?? 'silent',
});

/** Environment for an aggregator bound to one test's isolated names and database. */
export function aggregatorEnv(
  infra: { natsUrl: string; clickhouseUrl: string; names: NatsNames; database: string },
  overrides: Record<string, string> = {},
): Record<string, string> {
  return {
    NATS_URL: infra.natsUrl,
    CLICKHOUSE_URL: infra.clickhouseUrl,
    CLICKHOUSE_DATABASE: infra.database,
    BILLING_AGGREGATOR_OPS_PORT: '0',
    BILLING_AGGREGATOR_AUDIT_INTERVAL_MS: '0',
    BILLING_AGGREGATOR_FLUSH_INTERVAL_MS: '100',
    ...natsNamesToEnv(infra.names),
    ...overrides,
  };
}

export function aggregatorConfig(...args: Parameters<typeof aggregatorEnv>): AggregatorConfig {
  return loadConfig(aggregatorEnv(...args));
}

export function testClickHouse(url: string): SqlExecutor {
  return createClickHouse({ url, username: 'default', password: '', quiet: true });
}

/** Rows of events_raw_v1 after deduplication (what every view sees). */
export async function countEvents(
  ch: SqlExecutor,
  database: string,
  final = true,
): Promise<number> {
  const t = qualified(database, 'events_raw_v1');
  const [row] = await ch.query<{ n: string }>(
    final ? sql`SELECT count() AS n FROM ${t} FINAL` : sql`SELECT count() AS n FROM ${t}`,
  );
  return Number(row?.n ?? 0);
}

/** The value of `holdfast_aggregator_events_total{outcome}` in an in-process registry. */
export async function eventsCounter(registry: Registry, outcome: string): Promise<number> {
  const metric = registry.getSingleMetric('holdfast_aggregator_events_total');
  const data = await metric?.get();
  return data?.values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
}

/** The built service entry (tests spawn it as a real process). */
export const MAIN_JS = fileURLToPath(new URL('../dist/main.js', import.meta.url));

/** Calls with distinct token counts, and the tokens they bill in total. */
export function callsBilling(
  n: number,
  tenant = 'batch-summariser',
): {
  events: HoldfastEvent[];
  billed: number;
} {
  const events = Array.from({ length: n }, (_, i) =>
    settledCall({ tenant, prompt: 50 + (i % 97), completion: 1 + (i % 13) }),
  ).flat();
  const billed = events.reduce(
    (s, e) => s + (e.type === 'reservation.settled' ? e.billedTokens : 0),
    0,
  );
  return { events, billed };
}

/** Billed tokens as the hourly usage view reports them (deduplicated). */
export async function viewTokens(ch: SqlExecutor, database: string): Promise<number> {
  const [row] = await ch.query<{ t: string }>(
    sql`SELECT sum(tokens) AS t FROM ${qualified(database, 'usage_hourly_v1')}`,
  );
  return Number(row?.t ?? 0);
}

const MIGRATIONS = new URL('../migrations/', import.meta.url);

/** Applies only the migrations whose file names sort below `before` (the schema as it was then). */
export async function migrateUpTo(
  ch: SqlExecutor,
  database: string,
  before: string,
): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'holdfast-migrations-'));
  try {
    for (const f of (await readdir(MIGRATIONS)).filter((f) => f < before)) {
      await copyFile(new URL(f, MIGRATIONS), join(dir, f));
    }
    await migrate({ ch, database, logger: silent, dir: pathToFileURL(`${dir}/`) });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
