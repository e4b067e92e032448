import { env } from '@holdfast/config';
import { loadServiceConfig, serviceEnv, type ServiceConfig } from '@holdfast/runtime';
import { z } from 'zod';
import { isIdentifier } from './sql.js';

/** The aggregator's environment. One schema; parsed by `loadConfig()` from main, never at import. */
const AggregatorEnv = serviceEnv({
  /** ClickHouse HTTP interface. */
  CLICKHOUSE_URL: env.url('http://127.0.0.1:8123'),
  CLICKHOUSE_USER: env.string('default'),
  CLICKHOUSE_PASSWORD: z.string().default(''),
  /** The database the migrations create and the writer fills (docs/clickhouse.md: `holdfast`). */
  CLICKHOUSE_DATABASE: env
    .string('holdfast')
    .refine(isIdentifier, 'must be a plain identifier [A-Za-z_][A-Za-z0-9_]*'),
  /** /healthz, /readyz, /metrics. */
  BILLING_AGGREGATOR_OPS_PORT: env.port(9102),
  /** Durable consumer name; every replica shares it (JetStream spreads messages across them). */
  BILLING_AGGREGATOR_CONSUMER: env
    .string('billing-aggregator')
    .refine((v) => /^[A-Za-z0-9_-]{1,64}$/.test(v), 'must match [A-Za-z0-9_-]{1,64}'),
  /**
   * Rows per ClickHouse insert; a batch is flushed when it reaches this size... 25,000: each
   * insert is a part ClickHouse writes and later merges, and at 10,000 rows ClickHouse spent
   * twice the CPU per event (13-16 µs against 7-8.5 µs, docs/benchmarks.md).
   */
  BILLING_AGGREGATOR_BATCH_SIZE: env.int(25_000, 1, 1_000_000),
  /** ...or when its first event has waited this long (docs/clickhouse.md: every 5 s). */
  BILLING_AGGREGATOR_FLUSH_INTERVAL_MS: env.int(5_000, 10, 600_000),
  /** Messages one pull asks for; bounds what waits in the client buffer. */
  BILLING_AGGREGATOR_FETCH_SIZE: env.int(2_000, 1, 100_000),
  /**
   * Deliveries in bursts: one pull of what is stored every this many ms (a full one is
   * followed at once), so one socket read carries many events: a third of the CPU per event
   * of a delivery per event (docs/benchmarks.md). Events wait up to this long more before
   * they are batched, far inside the 5 s flush. 0: each event delivered as it is stored.
   */
  BILLING_AGGREGATOR_PULL_EVERY_MS: env.int(250, 0, 60_000),
  /**
   * Unacked messages the server lets out across all replicas. A replica holds up to two
   * batches and a pull (one inserting, one filling): below that, it stops pulling while it
   * inserts. The default leaves room for two replicas.
   */
  BILLING_AGGREGATOR_MAX_ACK_PENDING: env.int(125_000, 1, 10_000_000),
  /** A message not acked (nor marked working) within this is redelivered. */
  BILLING_AGGREGATOR_ACK_WAIT_MS: env.int(30_000, 1_000, 3_600_000),
  /** Period of the drift audit job; 0 turns it off. */
  BILLING_AGGREGATOR_AUDIT_INTERVAL_MS: env.int(300_000, 0, 86_400_000),
  /** Drift above this (tokens, or micro-USD for usd budgets) is logged as an error. */
  BILLING_AGGREGATOR_AUDIT_THRESHOLD: env.int(0, 0),
}).superRefine((e, ctx) => {
  if (e.BILLING_AGGREGATOR_FETCH_SIZE > e.BILLING_AGGREGATOR_BATCH_SIZE) {
    ctx.addIssue({
      code: 'custom',
      path: ['BILLING_AGGREGATOR_FETCH_SIZE'],
      message: 'must not exceed BILLING_AGGREGATOR_BATCH_SIZE',
    });
  }
  if (e.BILLING_AGGREGATOR_MAX_ACK_PENDING < e.BILLING_AGGREGATOR_BATCH_SIZE) {
    ctx.addIssue({
      code: 'custom',
      path: ['BILLING_AGGREGATOR_MAX_ACK_PENDING'],
      message: 'must be at least BILLING_AGGREGATOR_BATCH_SIZE, or batches never fill',
    });
  }
});

export interface AggregatorConfig extends ServiceConfig {
  clickhouse: { url: string; username: string; password: string; database: string };
  consumer: {
    durable: string;
    fetchSize: number;
    /** 0: consume(), each message as it is stored. */
    pullEveryMs: number;
    maxAckPending: number;
    ackWaitMs: number;
  };
  batch: { maxRows: number; maxWaitMs: number };
  audit: { intervalMs: number; threshold: number };
}

export function loadConfig(source: NodeJS.ProcessEnv = process.env): AggregatorConfig {
  return loadServiceConfig(AggregatorEnv, source, (e) => ({
    clickhouse: {
      url: e.CLICKHOUSE_URL,
      username: e.CLICKHOUSE_USER,
      password: e.CLICKHOUSE_PASSWORD,
      database: e.CLICKHOUSE_DATABASE,
    },
    opsPort: e.BILLING_AGGREGATOR_OPS_PORT,
    consumer: {
      durable: e.BILLING_AGGREGATOR_CONSUMER,
      fetchSize: e.BILLING_AGGREGATOR_FETCH_SIZE,
      pullEveryMs: e.BILLING_AGGREGATOR_PULL_EVERY_MS,
      maxAckPending: e.BILLING_AGGREGATOR_MAX_ACK_PENDING,
      ackWaitMs: e.BILLING_AGGREGATOR_ACK_WAIT_MS,
    },
    batch: {
      maxRows: e.BILLING_AGGREGATOR_BATCH_SIZE,
      maxWaitMs: e.BILLING_AGGREGATOR_FLUSH_INTERVAL_MS,
    },
    audit: {
      intervalMs: e.BILLING_AGGREGATOR_AUDIT_INTERVAL_MS,
      threshold: e.BILLING_AGGREGATOR_AUDIT_THRESHOLD,
    },
  }));
}
