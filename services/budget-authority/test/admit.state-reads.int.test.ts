import { Redis } from 'ioredis';
import { expect } from 'vitest';
import { Keys } from '../src/keys.js';
import { admissionOf, newId, refusalOf, authorityTest as test } from './harness.js';

/** An org with a team under it, a window each: two levels. */
const CONFIG = {
  upstreams: [{ id: 'u', baseUrl: 'http://127.0.0.1:1/v1' }],
  models: [{ id: 'm', upstream: 'u', price: { inputPerMTok: 0.15, outputPerMTok: 0.6 } }],
  tenants: [
    { id: 'acme', budgets: [{ window: 'month', limit: 1e9 }] },
    {
      id: 'team',
      parent: 'acme',
      budgets: [{ window: 'day', limit: 1e9 }],
      useCases: [{ id: 'uc', maxTokens: 100, models: ['m'] }],
    },
  ],
};
const call = () => ({
  reservationId: newId(),
  tenant: 'team',
  keyId: null,
  useCase: 'uc',
  model: 'm',
  promptTokens: 10,
  maxTokens: 20,
});

/**
 * What an admission reads of each level's state hash: `suspended` alone when the level is
 * neither suspended nor has calls in flight to adopt (its `suspended` then holds '0' and the
 * level's mark, admit.lua's clearMark), instead of the flag, `ad` and `am` (docs/budgets.md,
 * Suspensions). Seen by what it does: with each level's `ad` made stale after the first
 * admission, an admission that read it would adopt and write it back; one that did not leaves
 * it so.
 */
test("an admission reads one field of each level's state once the level is found clear; a suspension by any version still refuses", async ({
  start,
  redisUrl,
  iso,
}) => {
  const h = await start(CONFIG);
  const keys = new Keys(iso.keyPrefix);
  const states = [keys.state('acme', 'team'), keys.state('acme', 'acme')];
  admissionOf(await h.client.admit(call())); // each level found clear, and so marked
  const redis = new Redis(redisUrl);
  for (const st of states) {
    expect(await redis.hget(st, 'suspended')).toMatch(/^0./);
    await redis.hset(st, 'ad', 'stale');
  }
  admissionOf(await h.client.admit(call()));
  for (const st of states) expect(await redis.hget(st, 'ad')).toBe('stale');
  // A suspension written as an authority of the version before this one writes it (the flag
  // alone, `ad` kept): refused all the same, at either level.
  for (const st of states) {
    await redis.hset(st, 'suspended', '1');
    expect(refusalOf(await h.client.admit(call())).code).toBe('tenant_suspended');
    await redis.hset(st, 'suspended', '0');
    admissionOf(await h.client.admit(call()));
  }
  // And through the authority: suspended, refused; resumed, admitted.
  await h.client.suspend({ tenant: 'acme', reason: 'test', by: 'admin' });
  expect(refusalOf(await h.client.admit(call())).code).toBe('tenant_suspended');
  await h.client.resume({ tenant: 'acme', by: 'admin' });
  admissionOf(await h.client.admit(call()));
  redis.disconnect();
});
