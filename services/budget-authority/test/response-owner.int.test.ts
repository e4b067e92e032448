import { expect } from 'vitest';
import { RESPONSE_OWNER_TTL_MS } from '../src/handlers/close.js';
import { Keys } from '../src/keys.js';
import { stateKeys } from '../src/rebuild.js';
import { admissionOf, BASE_CONFIG, newId, readEvents, authorityTest as test } from './harness.js';

/**
 * A stored Responses response is owned by the tenant whose call stored it (its settle or
 * release names it): only that tenant's admits may continue it (previousResponseId). Every
 * tenant goes through the same upstream account, whose stored responses any id opens.
 */

/** Two teams of one org beside the experiment's teams of their own orgs. */
const CONFIG = {
  ...BASE_CONFIG,
  tenants: [
    ...BASE_CONFIG.tenants,
    { id: 'acme', budgets: [{ window: 'month', limit: 1_000_000, unit: 'tokens' }] },
    ...['team-a', 'team-b'].map((id) => ({
      id,
      parent: 'acme',
      budgets: [{ window: 'month', limit: 100_000, unit: 'tokens' }],
      useCases: [{ id: 'UC-1', maxTokens: 512, models: ['gpt-4o-mini'] }],
    })),
  ],
};

const admitOf = (tenant: string, over: Record<string, unknown> = {}) => ({
  reservationId: newId(),
  tenant,
  keyId: null,
  useCase: tenant.startsWith('team-') ? 'UC-1' : 'UC-101',
  model: 'gpt-4o-mini',
  promptTokens: 100,
  maxTokens: 100,
  api: 'responses' as const,
  ...over,
});

test("a settle records its response as the tenant's, in its org's slot for 30 days; only that tenant's admits continue it", async ({
  start,
  redis,
  iso,
  nc,
}) => {
  const h = await start(CONFIG);
  const first = admissionOf(await h.client.admit(admitOf('team-a')));
  const settled = await h.client.settle({
    reservationId: first.reservationId,
    tenant: 'team-a',
    org: first.org,
    usage: { promptTokens: 100, completionTokens: 10 },
    responseId: 'resp_abc123',
  });
  expect(settled).toMatchObject({ ok: true, value: { status: 'settled' } });
  const key = `${iso.keyPrefix}:{acme}:ro:resp_abc123`;
  expect(await redis.get(key)).toBe('team-a');
  const ttl = await redis.pttl(key);
  expect(ttl).toBeGreaterThan(RESPONSE_OWNER_TTL_MS - 60_000);
  expect(ttl).toBeLessThanOrEqual(RESPONSE_OWNER_TTL_MS);

  // The owner continues it.
  const next = admissionOf(
    await h.client.admit(admitOf('team-a', { previousResponseId: 'resp_abc123' })),
  );
  await h.client.release({
    reservationId: next.reservationId,
    tenant: 'team-a',
    reason: 'not_forwarded',
  });
  // A sibling team of the same org, a team of another org, and an id nobody stored: the same
  // answer, nothing held, no refusal recorded; uncounted (before the edge counts it) too.
  const before = await readEvents(nc, iso.names);
  for (const [tenant, id, uncounted] of [
    ['team-b', 'resp_abc123', false],
    ['support-bot', 'resp_abc123', false],
    ['team-a', 'resp_nobody', false],
    ['team-b', 'resp_abc123', true],
  ] as const) {
    const r = await h.client.admit(
      admitOf(tenant, {
        previousResponseId: id,
        ...(uncounted ? { uncounted, promptTokens: 0 } : {}),
      }),
    );
    expect(r.ok, `${tenant} ${id}`).toBe(false);
    expect(!r.ok && r.error).toMatchObject({
      code: 'response_not_found',
      message: `Previous response with id '${id}' not found.`,
    });
  }
  for (const tenant of ['team-b', 'support-bot']) {
    const usage = await h.client.usage({ tenant });
    expect(usage.ok && usage.value.tenants[0]?.inFlight).toBe(0);
    expect(usage.ok && usage.value.tenants[0]?.windows.every((w) => w.held === 0)).toBe(true);
  }
  const after = await readEvents(nc, iso.names);
  expect(after.slice(before.length).filter((e) => e.type !== 'reservation.released')).toEqual([]);
});

test('a release records the response the upstream stored before the call failed; a malformed id is refused on both requests', async ({
  start,
  redis,
  iso,
}) => {
  const h = await start(CONFIG);
  const a = admissionOf(await h.client.admit(admitOf('support-bot')));
  const released = await h.client.release({
    reservationId: a.reservationId,
    tenant: 'support-bot',
    reason: 'upstream_error',
    responseId: 'resp_failed-1',
  });
  expect(released).toMatchObject({ ok: true, value: { status: 'released' } });
  expect(await redis.get(`${iso.keyPrefix}:{support-bot}:ro:resp_failed-1`)).toBe('support-bot');
  admissionOf(
    await h.client.admit(admitOf('support-bot', { previousResponseId: 'resp_failed-1' })),
  );

  for (const bad of ['resp_', 'resp_a:b', 'resp_{x}', 'msg_1', `resp_${'a'.repeat(201)}`]) {
    const admit = await h.client.admit(admitOf('support-bot', { previousResponseId: bad }));
    expect(!admit.ok && admit.error.code, bad).toBe('invalid_request');
    const settle = await h.client.settle({
      reservationId: newId(),
      tenant: 'support-bot',
      usage: { promptTokens: 1, completionTokens: 1 },
      responseId: bad,
    });
    expect(!settle.ok && settle.error.code, bad).toBe('invalid_request');
  }
  const owner = `${iso.keyPrefix}:{support-bot}:ro:resp_failed-1`;
  expect(await redis.keys(`${iso.keyPrefix}:*:ro:*`)).toEqual([owner]);
  // Not budget state: a rebuild from the events (which do not say whose a response is) keeps it.
  const state = await stateKeys(redis, new Keys(iso.keyPrefix));
  expect(state.length).toBeGreaterThan(0);
  expect(state).not.toContain(owner);
});
