import { expect } from 'vitest';
import { Keys } from '../src/keys.js';
import type { TestAuthority } from '../src/testing.js';
import { admissionOf, BASE_CONFIG, miniCall, authorityTest as test } from './harness.js';

/** Settles the call at 150 tokens (100 prompt, 50 completion) on the default upstream. */
async function settled(h: TestAuthority, reservationId: string): Promise<void> {
  const r = await h.client.settle({
    reservationId,
    tenant: 'support-bot',
    upstream: 'default',
    model: 'gpt-4o-mini',
    usage: { promptTokens: 100, completionTokens: 50 },
  });
  expect(r).toMatchObject({ ok: true, value: { status: 'settled' } });
}

/** The tokens each declared scope counts in the last minute ('-': the upstream's own). */
async function tokensByScope(h: TestAuthority): Promise<Record<string, number>> {
  const u = await h.client.usage({});
  if (!u.ok) throw new Error(u.error.message);
  return Object.fromEntries(u.value.capacity.map((c) => [c.model ?? '-', c.tokens]));
}

/**
 * A call's share of an upstream's capacity is given back (or settled to its usage) on the
 * scopes it was taken on. An admin who declares a model's own capacity while calls are in
 * flight on its upstream must not have their closes give back, on the new scope, tokens that
 * were never taken there: that scope would count less than was sent, and let more through than
 * the provider allows.
 */
test('a capacity declared while a call is in flight is not given back what the call never took of it', async ({
  start,
}) => {
  const upstream = {
    ...BASE_CONFIG.upstreams[0]!,
    capacity: { tokensPerMinute: 100_000, counting: 'usage' as const },
  };
  const h = await start({ ...BASE_CONFIG, upstreams: [upstream] });
  const { reservationId, ...call } = miniCall(100, 400);
  const admitted = admissionOf(await h.client.admit({ reservationId, ...call }));
  expect(admitted.upstream).toBe('default');
  // The admin declares the model's own limit on that upstream while the call runs.
  const [mini, ...rest] = BASE_CONFIG.models;
  const applied = await h.client.configApply({
    document: {
      ...BASE_CONFIG,
      upstreams: [upstream],
      models: [{ ...mini!, capacity: { tokensPerMinute: 1_000 } }, ...rest],
    },
  });
  expect(applied.ok).toBe(true);
  await settled(h, reservationId);
  const rows = await tokensByScope(h);
  // The upstream's scope: settled to the call's usage. The model's: nothing was taken of it.
  expect(rows).toEqual({ '-': 150, 'gpt-4o-mini': 0 });
});

/**
 * The other way round: a capacity removed (or moved to another upstream) while a call holds a
 * take of it. Before, the close read the current config's scopes, so the take stayed in the
 * removed scope for its minute: declared again, that scope counted a call that had ended (and
 * with every capacity of the upstream removed, nothing was given back anywhere). Now the close
 * gives back (or settles to usage) every scope its take's record names, declared or not.
 */
test.for([
  ['the model\u2019s capacity removed', 'model'],
  ['the model\u2019s capacity moved to another upstream', 'moved'],
  ['every capacity of the upstream removed', 'all'],
] as const)(
  '%s while a call is in flight: its close gives back what it took',
  async ([, change], { start }) => {
    const upstream = {
      ...BASE_CONFIG.upstreams[0]!,
      capacity: { tokensPerMinute: 100_000, counting: 'usage' as const },
    };
    const other = { id: 'other', baseUrl: 'http://127.0.0.1:8090/v1' };
    const [mini, ...rest] = BASE_CONFIG.models;
    const declared = {
      ...BASE_CONFIG,
      upstreams: [upstream, other],
      models: [{ ...mini!, capacity: { tokensPerMinute: 10_000 } }, ...rest],
    };
    const h = await start(declared);
    const { reservationId, ...call } = miniCall(100, 400);
    expect(admissionOf(await h.client.admit({ reservationId, ...call })).upstream).toBe('default');
    const changed =
      change === 'model'
        ? { ...declared, models: [mini!, ...rest] }
        : change === 'moved'
          ? { ...declared, models: [{ ...declared.models[0]!, upstream: 'other' }, ...rest] }
          : {
              ...declared,
              upstreams: [BASE_CONFIG.upstreams[0]!, other],
              models: [mini!, ...rest],
            };
    expect((await h.client.configApply({ document: changed })).ok).toBe(true);
    await settled(h, reservationId);
    // Declared again, within the minute: each scope counts what the call used, not its take.
    expect((await h.client.configApply({ document: declared })).ok).toBe(true);
    const rows = await tokensByScope(h);
    // Both count usage (the upstream's `counting`), as when nothing changed.
    expect(rows).toEqual({ '-': 150, 'gpt-4o-mini': 150 });
  },
);

/**
 * An upstream's capacity windows live as long as what they hold counts (2 minutes past their
 * last change, or to the end of a provider's block): an admin who declares and removes
 * capacities (or whole upstreams) again and again leaves no key behind. Before, every scope's
 * window lived forever, and a close of a call on a removed scope wrote into it (or made it
 * again once gone).
 */
test("a removed capacity's window expires with its minute; a declared one is kept by its takes, a block for as long as it lasts", async ({
  start,
  redis,
  iso,
}) => {
  const keys = new Keys(iso.keyPrefix);
  const upstreamKey = keys.capacity('default', null);
  const modelKey = keys.capacity('default', 'gpt-4o-mini');
  const ttl = (key: string) => redis.pttl(key);
  const upstream = { ...BASE_CONFIG.upstreams[0]!, capacity: { tokensPerMinute: 100_000 } };
  const [mini, ...rest] = BASE_CONFIG.models;
  const declared = {
    ...BASE_CONFIG,
    upstreams: [upstream],
    models: [{ ...mini!, capacity: { tokensPerMinute: 10_000 } }, ...rest],
  };
  const h = await start(declared);
  const first = miniCall(100, 400);
  admissionOf(await h.client.admit(first));
  for (const key of [upstreamKey, modelKey]) {
    expect.soft(await ttl(key), key).toBeGreaterThan(0);
    expect.soft(await ttl(key), key).toBeLessThanOrEqual(120_000);
  }

  // The model's capacity removed while the call runs: its close gives back, and the window
  // still expires.
  expect(
    (await h.client.configApply({ document: { ...declared, models: [mini!, ...rest] } })).ok,
  ).toBe(true);
  await settled(h, first.reservationId);
  expect(await ttl(modelKey)).toBeGreaterThan(0);
  expect(await ttl(modelKey)).toBeLessThanOrEqual(120_000);
  // Gone (its minute long past): a close of a call on it makes no key.
  const second = miniCall(100, 400);
  expect((await h.client.configApply({ document: declared })).ok).toBe(true);
  admissionOf(await h.client.admit(second));
  expect(
    (await h.client.configApply({ document: { ...declared, models: [mini!, ...rest] } })).ok,
  ).toBe(true);
  await redis.del(modelKey);
  await settled(h, second.reservationId);
  expect(await redis.exists(modelKey)).toBe(0);
  // The provider then blocks the upstream for 5 minutes: its window lives that long.
  expect(await h.client.reportCapacity({ upstream: 'default', retryAfterMs: 300_000 })).toEqual({
    ok: true,
    value: { recorded: true },
  });
  expect(await ttl(upstreamKey)).toBeGreaterThan(120_000);
});
