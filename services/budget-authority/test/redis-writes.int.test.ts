import type { NatsNames } from '@holdfast/events';
import { AuthorityClient } from '@holdfast/runtime';
import type { NatsConnection } from '@nats-io/transport-node';
import { describe, expect } from 'vitest';
import { createRedis, isCluster } from '../src/redis.js';
import { scriptLibrary } from '../src/scripts.js';
import { useRedisCluster } from './cluster-harness.js';
import { recordWrites, single } from './socket-writes.js';
import { admissionOf, BASE_CONFIG, miniCall, authorityTest as test } from './harness.js';

/** How many times `needle` occurs in `text`. */
const count = (text: string, needle: string): number => text.split(needle).length - 1;

const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);

const batching = (nc: NatsConnection, names: NatsNames) =>
  new AuthorityClient({ nc, names, timeoutMs: 5_000, batch: true });

/**
 * The authority's command connection sends what it is given in one turn of the event loop in
 * one write (redis.ts, corkEachTurn): a batch of the call path's requests is one write(2) to
 * Redis, not one per script call, and Redis reads, runs and answers it as one.
 */
describe('the commands of one turn reach Redis in one write', () => {
  test('commands of one turn, synchronous and after awaits that settle in the turn, go out together; each gets its own reply', async ({
    redisUrl,
    iso,
  }) => {
    const redis = single(createRedis(redisUrl));
    await redis.connect();
    try {
      const writes = recordWrites(redis.stream);
      const key = `${iso.keyPrefix}:cork`;
      const replies = await Promise.all([
        redis.set(key, 'a'),
        redis.append(key, 'b'),
        // After an await that settles in the same turn (a microtask): still the same write.
        Promise.resolve().then(() => redis.append(key, 'c')),
        // A command that fails fails alone; the others are answered.
        redis.incr(key).catch((err: Error) => err.message),
        redis.get(key),
      ]);
      expect(replies).toEqual(['OK', 2, 3, expect.stringMatching(/not an integer/), 'ab']);
      expect(writes).toHaveLength(1);
      expect(count(writes[0]!, '\r\n')).toBeGreaterThan(5);

      // A command sent once a reply came back is a later turn: a write of its own.
      await redis.del(key);
      expect(writes).toHaveLength(2);
    } finally {
      redis.disconnect();
    }
  });

  test('a batch of 16 admits: their 16 script calls leave in one write', async ({
    start,
    nc,
    iso,
  }) => {
    const h = await start(BASE_CONFIG);
    const admit = scriptLibrary().functions.admit;
    const client = batching(nc, iso.names);
    // The first admit of a plan sends it by reference, hears NOPLAN and sends it in full.
    expect(admissionOf(await client.admit(miniCall(100, 100))).admitted).toBe(true);
    const writes = recordWrites(single(h.authority.ctx.redis).stream);
    const replies = await Promise.all(
      Array.from({ length: 16 }, () => client.admit(miniCall(100, 100))),
    );
    for (const r of replies) expect(admissionOf(r).admitted).toBe(true);
    const carrying = writes.filter((w) => w.includes(admit));
    expect(carrying.map((w) => count(w, admit))).toEqual([16]);
  });
});

describe('on Redis Cluster: one write per node a turn', () => {
  const { cluster } = useRedisCluster();

  test('keys on every master in one turn: each node gets one write, every reply right', async ({
    iso,
  }) => {
    const redis = createRedis({ nodes: cluster().url.split(','), cluster: true }, 5_000);
    if (!isCluster(redis)) throw new Error('expected a cluster client');
    redis.on('error', () => undefined);
    await redis.connect();
    try {
      // Enough keys that every master holds several (their hash slots spread over the nodes).
      const keys = Array.from({ length: 30 }, (_, i) => `${iso.keyPrefix}:cork:${i}`);
      // The first commands open the nodes' connections (a cluster client opens them lazily).
      await Promise.all(keys.map((k) => redis.set(k, 'x')));
      const masters = redis.nodes('master');
      expect(masters).toHaveLength(3);
      const writes = masters.map((m) => recordWrites(m.stream));
      const replies = await Promise.all(keys.map((k, i) => redis.set(k, String(i))));
      expect(replies).toEqual(keys.map(() => 'OK'));
      expect(await Promise.all(keys.map((k) => redis.get(k)))).toEqual(keys.map((_, i) => `${i}`));
      // Each master: one write for its SETs, one for its GETs; every command in one of them.
      for (const w of writes) expect(w).toHaveLength(2);
      const sets = writes.map((w) => count(w[0]!, '\r\nset\r\n'));
      const gets = writes.map((w) => count(w[1]!, '\r\nget\r\n'));
      expect(sets.every((n) => n > 0)).toBe(true);
      expect([sum(sets), sum(gets)]).toEqual([keys.length, keys.length]);
      expect(gets).toEqual(sets);
    } finally {
      redis.disconnect();
    }
  });
});
