import { parseConfig } from '@holdfast/config';
import type { NatsNames } from '@holdfast/events';
import { createLogger } from '@holdfast/runtime';
import { waitFor } from '@holdfast/testkit';
import type { NatsConnection } from '@nats-io/transport-node';
import { expect } from 'vitest';
import { Keys } from '../src/keys.js';
import { Rebuilder, stateKeys } from '../src/rebuild.js';
import type { RedisClient } from '../src/redis.js';
import type { Isolation } from '@holdfast/testkit';
import { admissionOf, BASE_CONFIG, newId } from './harness.js';
import { budgetState } from './rebuild-state.js';
import type { TestAuthority } from '../src/testing.js';

/**
 * The activity the rebuild tests replay (rebuild.int.test.ts on one Redis, cluster.int.test.ts
 * on Redis Cluster): every kind of state change over four orgs, with holds left live.
 */

const useCases = [{ id: 'uc', maxTokens: 1_000, models: ['gpt-4o-mini'] }];
export const CONFIG = {
  ...BASE_CONFIG,
  tenants: [
    {
      id: 'acme',
      budgets: [
        { window: 'day', limit: 1_000_000 },
        { window: 'month', limit: 50, unit: 'usd' },
      ],
    },
    {
      id: 'team-r',
      parent: 'acme',
      budgets: [
        { window: 'minute', limit: 100_000 },
        { window: 'day', limit: 5, unit: 'usd' },
        { window: 'month', limit: 500_000, calendar: true },
      ],
      useCases,
    },
    { id: 'team-e', mode: 'estimate', budgets: [{ window: 'day', limit: 100_000 }], useCases },
    {
      id: 'team-a',
      mode: 'adaptive',
      adaptive: { percentile: 0.95, minSamples: 3, samples: 50 },
      budgets: [{ window: 'day', limit: 100_000 }],
      useCases,
    },
    {
      id: 'team-k',
      parent: 'acme',
      budgets: [{ window: 'day', limit: 100_000 }],
      endUserBudgets: [
        { window: 'day', limit: 50_000 },
        { window: 'month', limit: 1, unit: 'usd', calendar: true },
      ],
      useCases,
      keys: [
        {
          id: 'kk',
          sha256: 'a'.repeat(64),
          budgets: [{ window: 'minute', limit: 90_000 }],
          maxEndUsers: 10,
        },
      ],
    },
  ],
};

export const call = (tenant: string, prompt: number, extensible = false) => ({
  reservationId: newId(),
  tenant,
  keyId: null,
  useCase: 'uc',
  model: 'gpt-4o-mini',
  promptTokens: prompt,
  maxTokens: 500,
  extensible,
});

export async function activity(h: TestAuthority): Promise<string[]> {
  const live: string[] = [];
  for (let i = 0; i < 10; i++) {
    const a = admissionOf(await h.client.admit(call('team-r', 100 + i)));
    if (i < 6)
      await h.client.settle({
        reservationId: a.reservationId,
        tenant: 'team-r',
        usage: { promptTokens: 100 + i, completionTokens: 50 * i, cachedPromptTokens: i },
      });
    else if (i < 8)
      await h.client.release({
        reservationId: a.reservationId,
        tenant: 'team-r',
        reason: 'upstream_error',
      });
    else live.push(a.reservationId);
    h.clock.advance(7_000);
  }
  for (let i = 0; i < 6; i++) {
    const a = admissionOf(await h.client.admit(call('team-e', 200)));
    if (i < 5)
      await h.client.settle({
        reservationId: a.reservationId,
        tenant: 'team-e',
        usage: { promptTokens: 190, completionTokens: 30 },
      });
    else
      await h.client.release({
        reservationId: a.reservationId,
        tenant: 'team-e',
        reason: 'not_forwarded',
      });
  }
  await h.client.suspend({ tenant: 'team-e', reason: 'test', by: 'admin' });
  for (let i = 0; i < 3; i++) {
    const a = admissionOf(await h.client.admit(call('team-a', 50, true)));
    await h.client.settle({
      reservationId: a.reservationId,
      tenant: 'team-a',
      usage: { promptTokens: 50, completionTokens: 100 },
    });
  }
  // A key's own budget and end users': closes that name them and closes that do not.
  for (let i = 0; i < 6; i++) {
    const a = admissionOf(
      await h.client.admit({ ...call('team-k', 120), keyId: 'kk', endUser: i % 2 ? 'x' : 'y' }),
    );
    const who = i % 3 === 0 ? { keyId: 'kk', endUser: i % 2 ? 'x' : 'y' } : {};
    if (i < 5)
      await h.client.settle({
        reservationId: a.reservationId,
        tenant: 'team-k',
        ...who,
        usage: { promptTokens: 120, completionTokens: 40 * i },
      });
    else live.push(a.reservationId);
    h.clock.advance(1_000);
  }
  const grown = admissionOf(await h.client.admit(call('team-a', 50, true)));
  expect(grown.coveredOutputTokens).toBe(100);
  await h.client.extend({
    reservationId: grown.reservationId,
    tenant: 'team-a',
    outputTokens: 300,
  });
  live.push(grown.reservationId);
  return live;
}

/** Waits until every outbox under the prefix is relayed (the stream then has every event). */
export async function outboxesRelayed(redis: RedisClient, keys: Keys): Promise<void> {
  await waitFor(
    async () => {
      const outboxes = (await stateKeys(redis, keys)).filter((k) => k.endsWith(':outbox'));
      return (await Promise.all(outboxes.map((k) => redis.xlen(k)))).every((n) => n === 0);
    },
    { what: 'outboxes relayed' },
  );
}

/** A rebuilder of CONFIG's state from the test's stream, as of `now`. */
export function rebuilder(o: {
  redis: RedisClient;
  nc: NatsConnection;
  names: NatsNames;
  keys: Keys;
  now: number;
  /** The config the state was written under (CONFIG when absent). */
  config?: unknown;
}): Rebuilder {
  const parsed = parseConfig(o.config ?? CONFIG);
  if (!parsed.ok) throw new Error(parsed.error.errors.join());
  return new Rebuilder({
    ...o,
    config: parsed.value,
    logger: createLogger({ name: 'rebuild', level: 'silent' }),
  });
}

/** Stops `h`, loses every budget key, rebuilds under `config`: the state before and after. */
export async function lostAndRebuilt(
  h: Pick<TestAuthority, 'clock' | 'stop'>,
  config: unknown,
  o: { nc: NatsConnection; redis: RedisClient; iso: Isolation },
): Promise<{ before: Record<string, unknown>; after: Record<string, unknown> }> {
  const keys = new Keys(o.iso.keyPrefix);
  await outboxesRelayed(o.redis, keys);
  const now = h.clock.now;
  await h.stop();
  const before = await budgetState(o.redis, keys, now);
  await o.redis.del(...(await stateKeys(o.redis, keys)));
  await rebuilder({ redis: o.redis, nc: o.nc, names: o.iso.names, keys, now, config }).run();
  return { before, after: await budgetState(o.redis, keys, now) };
}

/** What a rebuild and a restart need: the test's infra and its authority starter. */
interface RestartInfra {
  start: (config: unknown) => Promise<TestAuthority>;
  nc: NatsConnection;
  redis: RedisClient;
  iso: Isolation;
}

/**
 * Stops `h`, loses every budget key, rebuilds under `config` and starts an authority on the
 * rebuilt state at `h`'s instant; returns it. The state is expected the same softly: the test
 * goes on to show what a difference does to the calls after.
 */
export async function rebuiltAndRestarted(
  h: TestAuthority,
  config: unknown,
  o: RestartInfra,
): Promise<TestAuthority> {
  const { before, after } = await lostAndRebuilt(h, config, o);
  expect.soft(after).toEqual(before);
  const restarted = await o.start(config);
  restarted.clock.now = h.clock.now;
  return restarted;
}

/** Stops `h`, loses every budget key, rebuilds under `config`: the state must be the same. */
export async function rebuiltEqualsLive(
  h: Pick<TestAuthority, 'clock' | 'stop'>,
  config: unknown,
  o: { nc: NatsConnection; redis: RedisClient; iso: Isolation },
): Promise<void> {
  const { before, after } = await lostAndRebuilt(h, config, o);
  // Something to rebuild (a window, a level's state, an in-flight set, which is the org's lease
  // index too): the comparison below is not of two empty states.
  expect(Object.keys(before).length).toBeGreaterThan(2);
  expect(after).toEqual(before);
}
