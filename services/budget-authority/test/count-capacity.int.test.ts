import { expect } from 'vitest';
import { BASE_CONFIG, authorityTest as test } from './harness.js';

/**
 * An upstream's `countsPerMinute` (the provider's limit on its token-counting endpoint) is
 * shared as its capacity is: each team up to its `tenantShare`, each priority up to its share,
 * so a team sending many documents cannot take the counts every other team's documents need.
 */
test("a team's counts take at most its share of the upstream's countsPerMinute; the others keep theirs; an upstream without one is not limited", async ({
  iso,
  redis,
  start,
}) => {
  const h = await start({
    ...BASE_CONFIG,
    upstreams: [
      { ...BASE_CONFIG.upstreams[0], countsPerMinute: 10 },
      { id: 'other', baseUrl: 'http://127.0.0.1:8090/v1' },
    ],
    // normal priority: 9 of the 10; each team at most 5.
    capacity: { tenantShare: 0.5 },
  });
  const take = (tenant: string, upstream = 'default') =>
    h.client.takeCount({ tenant, upstream }).then((r) => {
      if (!r.ok) throw new Error(r.error.code);
      return r.value;
    });
  const batch = [];
  for (let i = 0; i < 7; i++) batch.push(await take('batch-summariser'));
  expect(batch.filter((r) => r.taken)).toHaveLength(5);
  expect(batch[5]).toMatchObject({ taken: false, who: 'tenant' });
  const retry = (batch[5] as { retryAfterSeconds: number }).retryAfterSeconds;
  expect(retry).toBeGreaterThanOrEqual(1);
  expect(retry).toBeLessThanOrEqual(60);
  // The other team still counts, up to what its priority leaves (9 in all).
  const support = [];
  for (let i = 0; i < 6; i++) support.push(await take('support-bot'));
  expect(support.filter((r) => r.taken)).toHaveLength(4);
  expect(support[4]).toMatchObject({ taken: false, who: 'all' });
  // A count is never closed: it keeps no record, only its 1 s bucket in the windows.
  expect(await redis.keys(`${iso.keyPrefix}*:r:*`)).toEqual([]);
  // No countsPerMinute, or a tenant not in the config: nothing to share.
  expect(await take('batch-summariser', 'other')).toEqual({ taken: true });
  expect(await take('nobody')).toEqual({ taken: true });
  const bad = await h.client.takeCount({ tenant: 'x y', upstream: 'default' });
  expect(bad.ok || bad.error.code).toBe('invalid_request');
});
