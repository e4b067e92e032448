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
 * Two replicas' config stores, A and B, each on a connection of its own (a test intercepts
 * A's commands); `stop` disconnects both.
 */
async function twoReplicas(redisUrl: string, keyPrefix: string) {
  const keys = new Keys(keyPrefix);
  const logger = createLogger({ name: 'config-refresh-test', level: 'silent' });
  const connect = async () => {
    const redis = createRedis(redisUrl);
    redis.on('error', () => undefined);
    await redis.connect();
    return redis;
  };
  const [redisA, redisB] = [await connect(), await connect()];
  return {
    keys,
    redisA,
    redisB,
    a: new ConfigStore({ redis: redisA, keys, logger, clock: Date.now }),
    b: new ConfigStore({ redis: redisB, keys, logger, clock: Date.now }),
    stop: () => {
      redisA.disconnect();
      redisB.disconnect();
    },
  };
}

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
  const { keys, redisA, a, b, stop } = await twoReplicas(redisUrl, iso.keyPrefix);
  try {
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
    stop();
  }
});

/**
 * A replica reloads the config whenever it hears of a change (a notice, its poll, an edge's
 * config.get) while its own apply waits on Redis: the apply must still be decided against the
 * version it checked, and report what it wrote.
 */
test('an apply a refresh overtakes: a pinned version is still enforced, and a change still reported as one', async ({
  redisUrl,
  iso,
}) => {
  const { keys, redisA, redisB, a, b, stop } = await twoReplicas(redisUrl, iso.keyPrefix);
  try {
    const applied = await b.apply(withLimit(1_000), 'test');
    if (!applied.ok) throw new Error(applied.error.message);
    expect(await a.refresh()).toBe(true);
    const send = redisA.sendCommand.bind(redisA);
    /** Runs `during` once, when A next sends a command `when` matches (before or after it). */
    const once = (
      when: (c: Command) => boolean,
      at: 'before' | 'after',
      during: () => Promise<unknown>,
    ) => {
      redisA.sendCommand = ((command: Command) => {
        if (!when(command)) return send(command);
        redisA.sendCommand = send;
        return at === 'before'
          ? during().then(() => send(command))
          : (send(command) as Promise<unknown>).then(async (reply) => (await during(), reply));
      }) as typeof redisA.sendCommand;
    };

    // A merge pinned to version 1 (PUT /admin/config?expectedVersion=1): while A reads the
    // declared document, B applies version 2 and A hears of it. Not applied on top of it.
    once(
      (c) => c.name === 'hmget' && c.args[0] === keys.configDeclared,
      'before',
      async () => {
        expect((await b.apply(withLimit(2_000), 'other admin')).ok).toBe(true);
        await a.refresh();
      },
    );
    const pinned = await a.apply(withLimit(3_000), 'test', { mode: 'merge', expectedVersion: 1 });
    expect(pinned.ok ? pinned.value : pinned.error.code).toBe('version_conflict');
    expect(Number(await redisB.get(keys.configVersion))).toBe(2);

    // An edit whose write A reloads (a config.get served meanwhile) before the apply goes on:
    // it changed the config, and says so (the edge then waits for it, replicas are told).
    expect(a.version).toBe(2);
    once(
      (c) => c.name === 'fcall',
      'after',
      () => a.refresh(),
    );
    const edit = await a.apply(withLimit(4_000), 'test');
    expect(edit.ok && edit.value).toMatchObject({ version: 3, changed: true });
  } finally {
    stop();
  }
});

/**
 * Every admit from an edge on a newer config than a replica's makes it reload
 * (`AdmitRequest.configVersion`): a burst of them at a change must read and parse the document
 * once, not once each (it may be 768 KiB), and each still decides on the new version.
 */
test('a burst of reloads to a newer version shares one read of the document', async ({
  redisUrl,
  iso,
}) => {
  const { redisA, a, b, stop } = await twoReplicas(redisUrl, iso.keyPrefix);
  try {
    expect((await b.apply(withLimit(1_000), 'test')).ok).toBe(true);
    await a.refresh();
    const applied = await b.apply(withLimit(2_000), 'test');
    if (!applied.ok) throw new Error(applied.error.message);
    const send = redisA.sendCommand.bind(redisA);
    let reads = 0;
    redisA.sendCommand = ((command: Command) => {
      if (command.name === 'mget') reads++;
      return send(command);
    }) as typeof redisA.sendCommand;
    await Promise.all(Array.from({ length: 200 }, () => a.atLeast(applied.value.version)));
    expect(a.version).toBe(applied.value.version);
    expect(reads).toBe(1);
    // At the version already: nothing read at all.
    await a.atLeast(applied.value.version);
    expect(reads).toBe(1);
  } finally {
    stop();
  }
});
