import { expect } from 'vitest';
import { BASE_CONFIG, newId, authorityTest as test, withPayloadLimit } from './harness.js';

/** 128 KiB: one tenant's 100 end users (~190 KB of windows) are over it. */
const MAX_PAYLOAD = 131_072;
const TENANTS = ['team-a', 'team-b', 'team-c'];
/** End users as callers name them: any `user` value, up to 128 characters. */
const endUser = (i: number) => `${'u'.repeat(120)}-${String(i).padStart(6, '0')}`;

const everyWindow = (limit: number) =>
  (['minute', 'day', 'month'] as const).flatMap((window) => [
    { window, limit, unit: 'tokens' as const },
    { window, limit, unit: 'usd' as const },
  ]);

const config = {
  ...BASE_CONFIG,
  tenants: TENANTS.map((id) => ({
    id,
    budgets: everyWindow(1_000_000_000),
    endUserBudgets: everyWindow(1_000_000_000),
    useCases: [{ id: 'UC-1', maxTokens: 16, models: ['gpt-4o-mini'] }],
  })),
};

test('usage replies on a NATS server with a small max_payload: a listing callers grew answers reply_too_large at once; every tenant at once is bounded and fits', async ({
  redisUrl,
  redis: _cleanup,
  iso,
}) => {
  await withPayloadLimit(MAX_PAYLOAD, { redisUrl, iso, config }, async (h) => {
    // Callers of each tenant name 100 end users (hostile or not: any `user` value makes one).
    for (const tenant of TENANTS) {
      const admits = await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          h.client.admit({
            reservationId: newId(),
            tenant,
            keyId: null,
            endUser: endUser(i),
            useCase: 'UC-1',
            model: 'gpt-4o-mini',
            promptTokens: 8,
            maxTokens: 16,
          }),
        ),
      );
      expect(admits.map((r) => (r.ok ? r.value.admitted : r.error.code))).toEqual(
        admits.map(() => true),
      );
    }

    // One tenant lists its 100 most recent end users: over the payload limit. The requester
    // hears why at once instead of waiting out its 5 s timeout.
    const started = performance.now();
    const one = await h.client.usage({ tenant: 'team-a' });
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(one.ok).toBe(false);
    if (!one.ok) {
      expect(one.error.code).toBe('reply_too_large');
      expect(one.error.message).toMatch(/over the NATS max_payload of 131072 bytes/);
    }
    // One end user of it still answers.
    const single = await h.client.usage({ tenant: 'team-a', endUser: endUser(7) });
    expect(single.ok && single.value.tenants[0]?.endUsers.map((u) => u.id)).toEqual([endUser(7)]);

    // Every tenant at once (the alerter's poll): 10 end users each, the count of all of them.
    const all = await h.client.usage({});
    expect(all.ok).toBe(true);
    if (all.ok) {
      expect(all.value.tenants).toHaveLength(3);
      for (const t of all.value.tenants) {
        expect(t.endUsers).toHaveLength(10);
        expect(t.endUserCount).toBe(100);
      }
    }
    // And the authority still serves: the failed reply broke nothing.
    const after = await h.client.admit({
      reservationId: newId(),
      tenant: 'team-b',
      keyId: null,
      useCase: 'UC-1',
      model: 'gpt-4o-mini',
      promptTokens: 8,
      maxTokens: 16,
    });
    expect(after.ok && after.value.admitted).toBe(true);
  });
});
