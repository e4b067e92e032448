import { startKillableRedis, waitFor, type KillableRedis, serverBinary } from '@holdfast/testkit';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { createRedis, type RedisClient } from '../src/redis.js';
import { authorityTest as test, quiescent, readEvents } from './harness.js';
import { startTestAuthority } from '../src/testing.js';
import { checkBooks, orgsConfig, startLoad, teamsOf } from './load.js';

/**
 * Issue 13, one Redis killed: with `appendfsync always` (the default of `pnpm stack` and
 * compose) every write is in the AOF before Redis answers, so kill -9 of Redis under load and
 * a restart from its files lose no acknowledged hold, settlement or outbox entry, and no limit
 * is exceeded. The authorities fail closed while Redis is down and recover on their own.
 */

let redis: KillableRedis;

beforeAll(async () => {
  const bin = serverBinary('redis');
  redis = await startKillableRedis(bin, { appendfsync: 'always' });
}, 30_000);
afterAll(() => redis?.stop());

describe('one Redis with appendfsync always', () => {
  let admin: RedisClient;
  beforeAll(async () => {
    admin = createRedis(redis.url, 5_000);
    admin.on('error', () => undefined);
    await admin.connect();
  });
  afterAll(() => admin?.disconnect());

  test('kill -9 of Redis under 256+ calls in flight and a restart from its AOF: nothing acknowledged is lost, no limit exceeded', async ({
    nc,
    natsUrl,
    iso,
  }) => {
    const orgs = Array.from({ length: 12 }, (_, i) => `${iso.token}-org${i}`);
    const reps = await Promise.all(
      [0, 1, 2].map(() =>
        startTestAuthority({
          natsUrl,
          redisUrl: redis.url,
          nc,
          names: iso.names,
          keyPrefix: iso.keyPrefix,
          config: orgsConfig(orgs),
          clock: false,
          sweepIntervalMs: 200,
        }),
      ),
    );
    try {
      const teams = teamsOf(orgs);
      const { books, end } = await startLoad(reps[0]!.client, teams);
      const admittedBefore = books.admitted;
      redis.kill();
      await new Promise((r) => setTimeout(r, 1_000));
      // Down: every call fails closed, none is admitted.
      expect(books.errors.size).toBeGreaterThan(0);
      await redis.restart();
      books.since = Date.now();
      await waitFor(() => orgs.every((o) => (books.answeredAfter.get(o) ?? 0) > 3), {
        timeoutMs: 20_000,
        what: 'every org answered again',
      });
      await end();
      expect(books.peak).toBeGreaterThanOrEqual(256);
      expect(books.admitted).toBeGreaterThan(admittedBefore);

      const final = await quiescent(reps[0]!.client, admin, iso.keyPrefix, 30_000);
      checkBooks(final, await readEvents(nc, iso.names), teams, books);
    } finally {
      await Promise.all(reps.map((r) => r.stop()));
    }
  }, 60_000);
});
