import { expect } from 'vitest';
import { admissionOf, BASE_CONFIG, miniCall, authorityTest as test } from './harness.js';

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
  const settled = await h.client.settle({
    reservationId,
    tenant: 'support-bot',
    upstream: 'default',
    model: 'gpt-4o-mini',
    usage: { promptTokens: 100, completionTokens: 50 },
  });
  expect(settled).toMatchObject({ ok: true, value: { status: 'settled' } });
  const u = await h.client.usage({});
  if (!u.ok) throw new Error(u.error.message);
  const rows = Object.fromEntries(u.value.capacity.map((c) => [c.model ?? '-', c.tokens]));
  // The upstream's scope: settled to the call's usage. The model's: nothing was taken of it.
  expect(rows).toEqual({ '-': 150, 'gpt-4o-mini': 0 });
});
