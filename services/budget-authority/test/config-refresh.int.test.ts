import { createLogger } from '@holdfast/runtime';
import { infraTest as test } from '@holdfast/testkit';
import type { Command } from 'ioredis';
import { expect } from 'vitest';
import { ConfigStore } from '../src/config-store.js';
import { Keys } from '../src/keys.js';
import { createRedis } from '../src/redis.js';
import { BASE_CONFIG } from './harness.js';

const withLimit = (limit: number) => ({
  ...BASE_CONFIG,
  tenants: BASE_CONFIG.tenants.map((t) =>
    t.id === 'support-bot' ? { ...t, budgets: [{ window: 'month', limit, unit: 'tokens' }] } : t,
  ),
});

/**
 * Issue 11, item 5b: a replica reloading the config must never serve one version's document
 * under another version's number. Replica B applies a new config before every single command
 * replica A sends while it refreshes: wherever an apply lands between two of A's reads, the
 * pair A ends up with is one that B wrote together.
 */
test('a refresh racing applies never pairs a document with another version', async ({
  redisUrl,
  redis,
  iso,
}) => {
  const keys = new Keys(iso.keyPrefix);
  const logger = createLogger({ name: 'config-refresh-test', level: 'silent' });
  const connect = async () => {
    const redis = createRedis(redisUrl);
    redis.on('error', () => undefined);
    await redis.connect();
    return redis;
  };
  const [redisA, redisB] = [await connect(), await connect()];
  try {
    const a = new ConfigStore({ redis: redisA, keys, logger, clock: Date.now });
    const b = new ConfigStore({ redis: redisB, keys, logger, clock: Date.now });
    // What B stored at each version: the truth A's cache is checked against.
    const written = new Map<number, string>();
    let limit = 1_000;
    const applyOnB = async () => {
      const r = await b.apply(withLimit(limit++), 'test');
      if (!r.ok) throw new Error(r.error.message);
      written.set(r.value.version, r.value.hash);
    };
    await applyOnB();
    expect(await a.refresh()).toBe(true);

    // Every command of A waits for one more apply of B to land first.
    const send = redisA.sendCommand.bind(redisA);
    let turn: Promise<unknown> = Promise.resolve();
    redisA.sendCommand = ((command: Command) => {
      turn = turn.then(applyOnB).then(() => send(command));
      return command.promise;
    }) as typeof redisA.sendCommand;

    for (let round = 0; round < 5; round++) {
      await a.refresh();
      expect({ version: a.version, hash: a.current.hash }).toEqual({
        version: a.version,
        hash: written.get(a.version),
      });
    }
    expect(a.version).toBeGreaterThan(1);
    expect(Number(await redis.get(keys.configVersion))).toBeGreaterThanOrEqual(a.version);
  } finally {
    redisA.disconnect();
    redisB.disconnect();
  }
});
