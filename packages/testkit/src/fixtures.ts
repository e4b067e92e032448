import { randomBytes } from 'node:crypto';
import { createClient, type ClickHouseClient } from '@clickhouse/client';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import { inject, test as base } from 'vitest';
import { requireUrl } from './resolve-infra.js';

/** Names that keep one test's data apart from every other test's. */
export interface Isolation {
  /** Short random token, e.g. `t3f9a0c12`. */
  token: string;
  /** Redis key prefix. */
  keyPrefix: string;
  /** NATS names: events stream, events subject prefix, authority subject prefix. */
  names: { eventsStream: string; eventsPrefix: string; authorityPrefix: string };
  /** ClickHouse database. */
  database: string;
}

export function isolation(): Isolation {
  const token = `t${randomBytes(4).toString('hex')}`;
  return {
    token,
    keyPrefix: `hf-${token}`,
    names: {
      eventsStream: `${token.toUpperCase()}_EVENTS`,
      eventsPrefix: `${token}.events`,
      authorityPrefix: `${token}.authority.v1`,
    },
    database: `hf_${token}`,
  };
}

export interface InfraFixtures {
  iso: Isolation;
  natsUrl: string;
  redisUrl: string;
  clickhouseUrl: string;
  nc: NatsConnection;
  redis: Redis;
  clickhouse: ClickHouseClient;
}

/**
 * vitest fixtures for tests against real NATS, Redis and ClickHouse. Each test gets isolated
 * names; resources it touched are removed afterwards (keys under its prefix, its stream, its
 * database). A missing piece of infra fails the test with the resolver's message.
 */
export const infraTest = base.extend<InfraFixtures>({
  // eslint-disable-next-line no-empty-pattern -- vitest fixtures take a destructured context
  iso: async ({}, use) => use(isolation()),
  // eslint-disable-next-line no-empty-pattern
  natsUrl: async ({}, use) => use(requireUrl(inject('infra'), 'nats')),
  // eslint-disable-next-line no-empty-pattern
  redisUrl: async ({}, use) => use(requireUrl(inject('infra'), 'redis')),
  // eslint-disable-next-line no-empty-pattern
  clickhouseUrl: async ({}, use) => use(requireUrl(inject('infra'), 'clickhouse')),
  nc: async ({ natsUrl, iso }, use) => {
    const nc = await connect({ servers: natsUrl, name: `test-${iso.token}` });
    await use(nc);
    const jsm = await jetstreamManager(nc);
    for (const stream of [iso.names.eventsStream, `${iso.names.eventsStream}_DEADLETTER`]) {
      await jsm.streams.delete(stream).catch(() => undefined);
    }
    await nc.drain();
  },
  redis: async ({ redisUrl, iso }, use) => {
    const redis = new Redis(redisUrl, { lazyConnect: false, maxRetriesPerRequest: 2 });
    await use(redis);
    await deleteByPrefix(redis, iso.keyPrefix);
    redis.disconnect();
  },
  clickhouse: async ({ clickhouseUrl, iso }, use) => {
    const admin = createClient({ url: clickhouseUrl });
    await admin.command({ query: `CREATE DATABASE IF NOT EXISTS ${iso.database}` });
    const client = createClient({ url: clickhouseUrl, database: iso.database });
    await use(client);
    await client.close();
    await admin.command({ query: `DROP DATABASE IF EXISTS ${iso.database}` });
    await admin.close();
  },
});

/** Deletes every key under a prefix (SCAN, never KEYS). */
async function deleteByPrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
}
