import { expect } from 'vitest';
import type { TestAuthority } from '../src/testing.js';
import { admissionOf, BASE_CONFIG, miniCall, refusalOf, authorityTest as test } from './harness.js';
import { rebuiltAndRestarted } from './rebuild-activity.js';

/**
 * The requests an upstream's provider counted beyond a call's admission: its retries after an
 * answered attempt (`capacity.retry`) and the request a release keeps when the provider
 * answered the call with an error (`answeredRequests`). Before, no event carried them: a
 * rebuild of Redis gave them back, and for the minute after it the upstream admitted calls the
 * provider would refuse (here 3 more against a limit of 10).
 */

const config = {
  ...BASE_CONFIG,
  upstreams: [{ ...BASE_CONFIG.upstreams[0]!, capacity: { requestsPerMinute: 10 } }],
  capacity: { shares: { high: 1, normal: 1, low: 1 } },
};

const on = { upstream: 'default', model: 'gpt-4o-mini' };

async function admitted(h: TestAuthority): Promise<string> {
  const call = miniCall(100, 400);
  expect(admissionOf(await h.client.admit(call)).upstream).toBe('default');
  return call.reservationId;
}

async function retried(h: TestAuthority, reservationId: string): Promise<void> {
  const r = await h.client.retryCapacity({ reservationId, tenant: 'support-bot', ...on });
  expect(r).toEqual({ ok: true, value: { taken: true } });
}

/** Settles a call at 100 prompt tokens and 20 out. */
async function settle(h: TestAuthority, reservationId: string): Promise<void> {
  const s = await h.client.settle({
    reservationId,
    tenant: 'support-bot',
    usage: { promptTokens: 100, completionTokens: 20 },
    ...on,
  });
  expect(s.ok && s.value.status).toBe('settled');
}

async function requests(h: TestAuthority): Promise<number> {
  const u = await h.client.usage({});
  if (!u.ok) throw new Error(u.error.message);
  return u.value.capacity.find((c) => c.upstream === 'default')!.requests;
}

test("a call's retries and a release's kept request are rebuilt: the upstream still counts them", async ({
  start,
  nc,
  redis,
  iso,
}) => {
  const h = await start(config);
  // Answered 500, 500, then 200: its admission's request and two retries'.
  const settled = await admitted(h);
  await retried(h, settled);
  await retried(h, settled);
  await settle(h, settled);
  h.clock.advance(1_000);
  // Answered 500 twice, then given up: its admission's request kept, and its retry's.
  const released = await admitted(h);
  await retried(h, released);
  const r = await h.client.release({
    reservationId: released,
    tenant: 'support-bot',
    reason: 'upstream_error',
    answeredRequests: 1,
    ...on,
  });
  expect(r.ok && r.value.status).toBe('released');
  h.clock.advance(1_000);
  // One in flight, given back at its release (the provider never answered it).
  const given = await admitted(h);
  const g = await h.client.release({
    reservationId: given,
    tenant: 'support-bot',
    reason: 'client_disconnected',
    ...on,
  });
  expect(g.ok && g.value.status).toBe('released');
  expect(await requests(h)).toBe(5);

  const h2 = await rebuiltAndRestarted(h, config, { start, nc, redis, iso });
  expect(await requests(h2)).toBe(5);
  // 5 more fit the limit of 10, the sixth does not.
  for (let i = 0; i < 5; i++) await admitted(h2);
  expect(refusalOf(await h2.client.admit(miniCall(100, 400))).code).toBe('upstream_capacity');
});

test('the retries of a call still in flight at a rebuild are rebuilt: the upstream still counts them, and its close then counts none twice', async ({
  start,
  nc,
  redis,
  iso,
}) => {
  const h = await start(config);
  // Answered 500 twice so far, its second retry on its way: its admission's request and two
  // retries', each in its own second.
  const live = await admitted(h);
  h.clock.advance(1_000);
  await retried(h, live);
  h.clock.advance(1_000);
  await retried(h, live);
  expect(await requests(h)).toBe(3);

  // Before, no event carried a retry until its call closed: the rebuild counted 1, and the
  // upstream admitted 9 more calls against its limit of 10 (the provider's account had 3).
  const h2 = await rebuiltAndRestarted(h, config, { start, nc, redis, iso });
  expect(await requests(h2)).toBe(3);

  // The call ends after the rebuild: its close carries its two retries, counted once.
  await settle(h2, live);
  expect(await requests(h2)).toBe(3);
  // And rebuilt again once it closed: still 3.
  const h3 = await rebuiltAndRestarted(h2, config, { start, nc, redis, iso });
  expect(await requests(h3)).toBe(3);
  // 7 more fit the limit of 10, the eighth does not.
  for (let i = 0; i < 7; i++) await admitted(h3);
  expect(refusalOf(await h3.client.admit(miniCall(100, 400))).code).toBe('upstream_capacity');
});
