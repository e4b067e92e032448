import { expect } from 'vitest';
import type { TestAuthority } from '../src/testing.js';
import { admittedOnDefault, inOrg } from './capacity-moves.js';
import { waitFor } from '@holdfast/testkit';
import { BASE_CONFIG, miniCall, newId, readEvents, authorityTest as test } from './harness.js';

/**
 * `capacity.retry`: a retry on the upstream a call's capacity is on, after the provider
 * answered an attempt there, takes one more request of its `requestsPerMinute`. Only a live
 * hold of the team and model named, on that upstream, takes one: before, a settled, released,
 * expired or unknown reservation (or another team's) took a request for its minute too.
 */

const config = {
  ...BASE_CONFIG,
  upstreams: [
    { ...BASE_CONFIG.upstreams[0]!, capacity: { requestsPerMinute: 100 } },
    { id: 'backup', baseUrl: 'http://127.0.0.1:8090/v1', capacity: { requestsPerMinute: 100 } },
  ],
  models: BASE_CONFIG.models.map((m) =>
    m.id === 'gpt-4o-mini' ? { ...m, fallbackUpstreams: ['backup'] } : m,
  ),
};

const retry = (reservationId: string, over: Record<string, string> = {}) => ({
  reservationId,
  tenant: 'support-bot',
  model: 'gpt-4o-mini',
  upstream: 'default',
  ...over,
});

/** The requests each upstream's capacity counts in the last minute (the status page). */
async function requests(h: TestAuthority): Promise<Record<string, number>> {
  const u = await h.client.usage({});
  if (!u.ok) throw new Error(u.error.message);
  return Object.fromEntries(u.value.capacity.map((c) => [c.upstream, c.requests]));
}

/**
 * Settles a call on the default upstream (100 prompt tokens, 10 out; in `org`, the admission's,
 * when named): its take's request kept.
 */
async function settle(h: TestAuthority, reservationId: string, org?: string): Promise<void> {
  const s = await h.client.settle({
    reservationId,
    tenant: 'support-bot',
    ...(org ? { org } : {}),
    usage: { promptTokens: 100, completionTokens: 10 },
    upstream: 'default',
    model: 'gpt-4o-mini',
  });
  expect(s.ok && s.value.status).toBe('settled');
}

test('a retry of a live hold takes one request of its upstream', async ({ start }) => {
  const h = await start(config);
  const id = await admittedOnDefault(h);
  expect(await h.client.retryCapacity(retry(id))).toEqual({ ok: true, value: { taken: true } });
  expect(await requests(h)).toEqual({ default: 2, backup: 0 });
});

test('a retry of no live hold (settled, released, expired, unknown, another team, model or upstream) is invalid_request and takes nothing', async ({
  start,
}) => {
  const h = await start(config);
  const settled = await admittedOnDefault(h);
  await settle(h, settled);
  const released = await admittedOnDefault(h);
  const r = await h.client.release({
    reservationId: released,
    tenant: 'support-bot',
    reason: 'client_disconnected',
    upstream: 'default',
    model: 'gpt-4o-mini',
  });
  expect(r.ok && r.value.status).toBe('released');
  const live = await admittedOnDefault(h);
  // settled: 1 request kept; released: given back; live: 1.
  expect(await requests(h)).toEqual({ default: 2, backup: 0 });

  const asks = [
    retry(settled),
    retry(released),
    retry(newId()),
    retry(live, { tenant: 'batch-summariser' }),
    retry(live, { model: 'gpt-4o' }),
    retry(live, { upstream: 'backup' }),
  ];
  for (const ask of asks) {
    const reply = await h.client.retryCapacity(ask);
    expect
      .soft(reply.ok ? reply.value : reply.error.code, JSON.stringify(ask))
      .toBe('invalid_request');
  }
  expect(await requests(h)).toEqual({ default: 2, backup: 0 });

  // Its lease past (not swept yet): no live hold either.
  h.clock.advance(31 * 60_000);
  const expired = await h.client.retryCapacity(retry(live));
  expect(expired.ok ? expired.value : expired.error.code).toBe('invalid_request');
  expect(await requests(h)).toEqual({ default: 0, backup: 0 });
});

test('a retry of a call moved to a fallback takes a request there', async ({ start }) => {
  const h = await start(config);
  const call = miniCall(100, 400);
  const a = await h.client.admit(call);
  expect(a.ok && a.value.admitted).toBe(true);
  const id = call.reservationId;
  const moved = await h.client.moveCapacity({
    reservationId: id,
    tenant: 'support-bot',
    model: 'gpt-4o-mini',
    from: 'default',
    to: 'backup',
    tokens: 500,
  });
  expect(moved).toEqual({ ok: true, value: { moved: true } });
  expect(await h.client.retryCapacity(retry(id, { upstream: 'backup' }))).toEqual({
    ok: true,
    value: { taken: true },
  });
  const onDefault = await h.client.retryCapacity(retry(id));
  expect(onDefault.ok ? onDefault.value : onDefault.error.code).toBe('invalid_request');
  expect(await requests(h)).toEqual({ default: 0, backup: 2 });
});

test("a retry the upstream has no request left for is refused and taken back from the hold's count: its close counts only the retries taken", async ({
  start,
  nc,
  iso,
}) => {
  // Two requests a minute: the admission's and one retry's.
  const h = await start({
    ...config,
    upstreams: [{ ...config.upstreams[0]!, capacity: { requestsPerMinute: 2 } }],
    models: BASE_CONFIG.models,
    capacity: { shares: { high: 1, normal: 1, low: 1 } },
  });
  const id = await admittedOnDefault(h);
  expect(await h.client.retryCapacity(retry(id))).toEqual({ ok: true, value: { taken: true } });
  for (let i = 0; i < 3; i++) {
    expect(await h.client.retryCapacity(retry(id))).toEqual({ ok: true, value: { taken: false } });
  }
  expect(await requests(h)).toEqual({ default: 2 });
  await settle(h, id);
  expect(await requests(h)).toEqual({ default: 2 });
  // The close's event says one retry (a rebuild replays it), not the four asked.
  const settled = await waitFor(
    async () =>
      (await readEvents(nc, iso.names)).find(
        (e) => e.type === 'reservation.settled' && e.reservationId === id,
      ),
    { what: 'the settle event' },
  );
  expect(settled).toMatchObject({ retryRequests: 1 });
});

test("a retry of a call of a team moved to another org since its admission takes its request, in its admission's org", async ({
  start,
}) => {
  const h = await start(inOrg(config, 'acme'));
  const id = await admittedOnDefault(h);
  expect((await h.client.configApply({ document: inOrg(config, 'globex') })).ok).toBe(true);
  // The edge names the org the admission answered, as its closes and moves do.
  expect(await h.client.retryCapacity({ ...retry(id), org: 'acme' })).toEqual({
    ok: true,
    value: { taken: true },
  });
  // Named in another org (or in none: the team's now), no hold is found: nothing taken.
  for (const org of ['globex', undefined]) {
    const r = await h.client.retryCapacity({ ...retry(id), ...(org ? { org } : {}) });
    expect.soft(r.ok ? r.value : r.error.code, String(org)).toBe('invalid_request');
  }
  expect(await requests(h)).toEqual({ default: 2, backup: 0 });
  await settle(h, id, 'acme');
  expect(await requests(h)).toEqual({ default: 2, backup: 0 });
});
