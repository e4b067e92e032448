import { natsNamesToEnv } from '@holdfast/config';
import type { NatsNames } from '@holdfast/events';
import { AuthorityClient, createLogger } from '@holdfast/runtime';
import type { NatsConnection } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import type { Authority } from './authority.js';
import type { Durability } from './durable.js';
import { loadConfig } from './env.js';
import { start } from './service.js';
import { whileStoreStarts } from './store-error.js';

/**
 * What a test starts an authority with: the test run's servers, its isolated names and key
 * prefix, and the tenant document to apply. Exported as `@holdfast/budget-authority/testing`
 * so every package's tests start the authority one way, through the service's own `start`.
 */
export interface TestAuthorityOptions {
  /** The NATS server the authority connects to (it opens its own connection, as in main.ts). */
  natsUrl: string;
  /** The test's connection: the returned client's, so it outlives the authority's stop. */
  nc: NatsConnection;
  /** One Redis URL, or Redis Cluster's nodes comma-separated (a list means a cluster). */
  redisUrl: string;
  names: NatsNames;
  keyPrefix: string;
  /** The tenant document applied (source `test`) before the authority is handed back. */
  config?: unknown;
  /**
   * true (default): a clock the test moves (`clock.now`, `clock.advance`) drives the scripts
   * and the process. false: the real clock, and scripts read Redis TIME.
   */
  clock?: boolean;
  /** Where the movable clock starts (default 2026-11-30T12:00Z). */
  clockStartsAt?: number;
  /** This process's clock (scripts still read Redis TIME): a replica whose host clock is off. */
  now?: () => number;
  /** How often overdue holds are expired, ms (default 100). */
  sweepIntervalMs?: number;
  /** How often acked closes the closes stream kept are purged, ms (default 60 s). */
  closesPurgeEveryMs?: number;
  /** Lease of an org's outbox relay, ms (default 1 s). */
  relayLeaseMs?: number;
  /** The relay's pause after a small round, ms (default 5); its deletes wait for company that long. */
  relayPauseMs?: number;
  /** Replicas each write waits for (Redis WAIT) before the authority answers; none by default. */
  durability?: Durability;
  /** The Redis command timeout, ms (default 1 s). */
  redisTimeoutMs?: number;
}

export interface TestAuthority {
  authority: Authority;
  /** A client of the authority on the test's connection (5 s timeout). */
  client: AuthorityClient;
  /** The movable clock (only moves what the authority sees when `clock` is not false). */
  clock: { now: number; advance(ms: number): void };
  natsUrl: string;
  redisUrl: string;
  /** Stops the authority, then its NATS and Redis connections; a second call does nothing. */
  stop(): Promise<void>;
}

const silent = createLogger({
  name: 'authority-test',
  level: process.env.TEST_LOG_LEVEL ?? 'silent',
});

/** Starts the authority in this process with `start(config, deps)`, as main.ts does. */
export async function startTestAuthority(opts: TestAuthorityOptions): Promise<TestAuthority> {
  const clock = {
    now: opts.clockStartsAt ?? Date.UTC(2026, 10, 30, 12, 0, 0),
    advance(ms: number) {
      this.now += ms;
    },
  };
  const config = loadConfig({
    NATS_URL: opts.natsUrl,
    REDIS_URL: opts.redisUrl,
    HOLDFAST_KEY_PREFIX: opts.keyPrefix,
    AUTHORITY_SWEEP_INTERVAL_MS: String(opts.sweepIntervalMs ?? 100),
    ...(opts.closesPurgeEveryMs === undefined
      ? {}
      : { AUTHORITY_CLOSES_PURGE_EVERY_MS: String(opts.closesPurgeEveryMs) }),
    AUTHORITY_RELAY_LEASE_MS: String(opts.relayLeaseMs ?? 1_000),
    // The relay's own default, which the tests were written against.
    AUTHORITY_RELAY_PAUSE_MS: String(opts.relayPauseMs ?? 5),
    AUTHORITY_REDIS_TIMEOUT_MS: String(opts.redisTimeoutMs ?? 1_000),
    // Explicit: a cluster would otherwise default to waiting for 1 replica.
    AUTHORITY_REDIS_WAIT_REPLICAS: String(opts.durability?.replicas ?? 0),
    ...(opts.durability
      ? { AUTHORITY_REDIS_WAIT_TIMEOUT_MS: String(opts.durability.timeoutMs) }
      : {}),
    ...(opts.durability?.connections
      ? { AUTHORITY_REDIS_WAIT_CONNECTIONS: String(opts.durability.connections) }
      : {}),
    ...natsNamesToEnv(opts.names),
  });
  const started = await start(config, {
    logger: silent,
    registry: new Registry(),
    clock: opts.now ?? (opts.clock === false ? undefined : () => clock.now),
    redisTime: opts.now !== undefined,
  });
  const { authority } = started;
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await started.stop();
  };
  if (opts.config !== undefined) {
    // As a start's own steps: applying the same document again after a timeout is harmless.
    const applied = await whileStoreStarts(silent, 'config', () =>
      authority.ctx.config.apply(opts.config, 'test'),
    ).catch(async (err: unknown) => {
      await stop();
      throw err;
    });
    if (!applied.ok) {
      await stop();
      throw new Error(applied.error.message);
    }
  }
  return {
    authority,
    client: new AuthorityClient({ nc: opts.nc, names: opts.names, timeoutMs: 5_000 }),
    clock,
    natsUrl: opts.natsUrl,
    redisUrl: opts.redisUrl,
    stop,
  };
}

/** Batch messages an authority received and the requests they carried (its batch histogram). */
export async function batchStats(
  authority: Authority,
): Promise<{ batches: number; items: number }> {
  const { values } = await authority.ctx.metrics.batchSize.get();
  const value = (name: string) =>
    values.find((v) => v.metricName === `holdfast_authority_batch_items_${name}`)?.value ?? 0;
  return { batches: value('count'), items: value('sum') };
}
