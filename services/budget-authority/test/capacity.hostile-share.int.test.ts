import { expect } from 'vitest';
import type { TestAuthority } from '../src/testing.js';
import {
  admissionOf,
  BASE_CONFIG,
  miniCall,
  newId,
  refusalOf,
  authorityTest as test,
} from './harness.js';

/**
 * A team with valid keys trying to take more of a shared upstream's capacity than its share
 * allows (gap 5): spamming capacity.retry on one live hold, and asking again and again while
 * the upstream is full (as the edge does for `maxQueueMs`). Probes: neither takes past the
 * team's `tenantShare` nor holds an in-flight slot or a window count while refused.
 */

/** 10 requests a minute on `default`, every priority up to all of it, a team up to `share`. */
function sharedUpstream(share: number, supportMaxInFlight?: number) {
  return {
    ...BASE_CONFIG,
    upstreams: [{ ...BASE_CONFIG.upstreams[0]!, capacity: { requestsPerMinute: 10 } }],
    capacity: { shares: { high: 1, normal: 1, low: 1 }, tenantShare: share },
    tenants: BASE_CONFIG.tenants.map((t) =>
      t.id === 'support-bot' && supportMaxInFlight !== undefined
        ? { ...t, maxInFlight: supportMaxInFlight }
        : t,
    ),
  };
}

/** A call of batch-summariser (the other team), max_tokens 400. */
function batchCall() {
  return { ...miniCall(100, 400), tenant: 'batch-summariser', useCase: 'UC-112' };
}

async function requests(h: TestAuthority): Promise<number> {
  const u = await h.client.usage({});
  if (!u.ok) throw new Error(u.error.message);
  return u.value.capacity.find((c) => c.upstream === 'default')!.requests;
}

async function inFlight(h: TestAuthority, tenant: string): Promise<number> {
  const u = await h.client.usage({ tenant });
  if (!u.ok) throw new Error(u.error.message);
  return u.value.tenants[0]!.inFlight;
}

test("capacity.retry spammed on one live hold takes at most the team's tenantShare of the minute: the other team keeps its share", async ({
  start,
}) => {
  // A team's share: 5 of the 10 requests a minute.
  const h = await start(sharedUpstream(0.5));
  const call = miniCall(100, 400);
  expect(admissionOf(await h.client.admit(call)).upstream).toBe('default');
  const retry = {
    reservationId: call.reservationId,
    tenant: 'support-bot',
    model: 'gpt-4o-mini',
    upstream: 'default',
  };
  let taken = 0;
  for (let i = 0; i < 20; i++) {
    const r = await h.client.retryCapacity(retry);
    if (!r.ok) throw new Error(r.error.message);
    if (r.value.taken) taken++;
  }
  // The admission's request and 4 retries: the team's 5.
  expect(taken).toBe(4);
  expect(await requests(h)).toBe(5);
  for (let i = 0; i < 5; i++) admissionOf(await h.client.admit(batchCall()));
  expect(await requests(h)).toBe(10);
  // Once it closed, no retry of it takes anything.
  const s = await h.client.settle({
    reservationId: call.reservationId,
    tenant: 'support-bot',
    usage: { promptTokens: 100, completionTokens: 10 },
    upstream: 'default',
    model: 'gpt-4o-mini',
  });
  expect(s.ok && s.value.status).toBe('settled');
  h.clock.advance(61_000);
  const after = await h.client.retryCapacity(retry);
  expect(after.ok ? after.value : after.error.code).toBe('invalid_request');
  expect(await requests(h)).toBe(0);
});

test('asks refused while the upstream is full (a call queued for capacity) hold no in-flight slot and count nothing: the team is admitted up to its maxInFlight once room frees', async ({
  start,
}) => {
  const h = await start(sharedUpstream(1, 2));
  // The other team fills the upstream's minute.
  for (let i = 0; i < 10; i++) admissionOf(await h.client.admit(batchCall()));
  // 60 asks of support-bot: three calls asking again and again, as the edge's queue does,
  // and 57 more.
  const queued = [newId(), newId(), newId()];
  for (let i = 0; i < 60; i++) {
    const id = i < 57 ? queued[i % 3]! : newId();
    expect(refusalOf(await h.client.admit(miniCall(100, 400, id))).code).toBe('upstream_capacity');
    h.clock.advance(500);
  }
  expect(await inFlight(h, 'support-bot')).toBe(0);
  expect(await requests(h)).toBe(10);
  // The minute over: room again, and the team's two slots free.
  h.clock.advance(31_000);
  expect(await requests(h)).toBe(0);
  admissionOf(await h.client.admit(miniCall(100, 400, queued[0])));
  admissionOf(await h.client.admit(miniCall(100, 400, queued[1])));
  expect(refusalOf(await h.client.admit(miniCall(100, 400, queued[2]))).code).toBe(
    'concurrency_limit',
  );
  expect(await requests(h)).toBe(2);
});
