import { ERROR_HEADER, ERROR_MESSAGE_HEADER } from '@holdfast/events';
import { authoritySubject } from '@holdfast/runtime';
import { readEvents, type Isolation } from '@holdfast/testkit';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Redis } from 'ioredis';
import { expect } from 'vitest';
import { Keys } from '../src/keys.js';
import type { TestAuthority } from '../src/testing.js';
import { admissionOf, BASE_CONFIG, miniCall, authorityTest as test } from './harness.js';
import { outboxesRelayed } from './rebuild-activity.js';
import { budgetState } from './rebuild-state.js';

/**
 * `capacity.move` asked as an attacker with the edge's access would ask it: for a call of
 * another team or org, for a call already closed, twice, onto the upstream the call holds,
 * with tokens past the call's worst case, negative or huge. Each is answered
 * `invalid_request` with a message that says why, and changes nothing: no capacity window,
 * record or budget, and no `reservation.moved`. Before, the authority checked only that the
 * names were in its config: a move of another team's call took the fallback for it and gave
 * back that team's take of its first upstream (a second team's call then had the room), one
 * after the call's settle took 500 tokens of the fallback that no close would give back, and
 * one of 1,800 tokens for a 500-token call took the whole fallback a normal-priority call may.
 */

const config = {
  ...BASE_CONFIG,
  upstreams: [
    { ...BASE_CONFIG.upstreams[0]!, capacity: { tokensPerMinute: 20_000 } },
    { id: 'backup', baseUrl: 'http://127.0.0.1:8090/v1', capacity: { tokensPerMinute: 2_000 } },
  ],
  models: BASE_CONFIG.models.map((m) => ({ ...m, fallbackUpstreams: ['backup'] })),
  tenants: [
    { id: 'acme', budgets: [{ window: 'day', limit: 100_000 }] },
    ...['team', 'rival'].map((id) => ({
      id,
      parent: 'acme',
      budgets: [{ window: 'day', limit: 100_000 }],
      useCases: [{ id: 'uc', maxTokens: 2_000, models: ['gpt-4o-mini'] }],
    })),
    {
      id: 'outsider',
      budgets: [{ window: 'day', limit: 100_000 }],
      useCases: [{ id: 'uc', maxTokens: 2_000, models: ['gpt-4o-mini'] }],
    },
  ],
};

async function admitted(h: TestAuthority, tenant: string): Promise<string> {
  const call = { ...miniCall(100, 400), tenant, useCase: 'uc' };
  expect(admissionOf(await h.client.admit(call)).upstream).toBe('default');
  return call.reservationId;
}

const move = (reservationId: string, o: Record<string, unknown> = {}) => ({
  reservationId,
  tenant: 'team',
  model: 'gpt-4o-mini',
  from: 'default',
  to: 'backup',
  tokens: 500,
  ...o,
});

test('a move of another team or org, of a closed call, onto its own upstream or past its worst case: invalid_request, nothing changed', ({
  start,
  nc,
  redis,
  iso,
}) => movesRefused({ start, nc, redis, iso }));

interface Infra {
  start: (config: unknown) => Promise<TestAuthority>;
  nc: NatsConnection;
  redis: Redis;
  iso: Isolation;
}

async function movesRefused({ start, nc, redis, iso }: Infra) {
  const keys = new Keys(iso.keyPrefix);
  const h = await start(config);
  const rivals = await admitted(h, 'rival');
  const outsiders = await admitted(h, 'outsider');
  const settled = await admitted(h, 'team');
  const released = await admitted(h, 'team');
  const live = await admitted(h, 'team');
  const closeOf = { tenant: 'team', upstream: 'default', model: 'gpt-4o-mini' };
  const usage = { promptTokens: 100, completionTokens: 50 };
  expect((await h.client.settle({ reservationId: settled, ...closeOf, usage })).ok).toBe(true);
  const reason = 'upstream_error' as const;
  expect((await h.client.release({ reservationId: released, ...closeOf, reason })).ok).toBe(true);
  await outboxesRelayed(redis, keys);
  const before = await budgetState(redis, keys, h.clock.now);
  const cases: [string, unknown][] = [
    ['a call of another team of the org', move(rivals)],
    ['a call of another org', move(outsiders)],
    ['a call settled', move(settled)],
    ['a call released', move(released)],
    ['a call never admitted', move(miniCall(1, 1).reservationId)],
    ['another model than the call', move(live, { model: 'gpt-4o' })],
    ['onto the upstream it holds', move(live, { to: 'default' })],
    ['tokens past its worst case (500)', move(live, { tokens: 1_800 })],
    ['negative tokens', move(live, { tokens: -500 })],
    ['huge tokens', move(live, { tokens: 1e12 })],
    ['fractional tokens', move(live, { tokens: 1.5 })],
    ['negative fromUsedTokens', move(live, { fromUsedTokens: -1 })],
  ];
  const subject = authoritySubject(iso.names, 'capacity.move');
  for (const [name, body] of cases) {
    const reply = await nc.request(subject, JSON.stringify(body), { timeout: 5_000 });
    expect(reply.headers?.get(ERROR_HEADER), name).toBe('invalid_request');
    expect(reply.headers?.get(ERROR_MESSAGE_HEADER), name).toBeTruthy();
  }
  await outboxesRelayed(redis, keys);
  expect(await budgetState(redis, keys, h.clock.now)).toEqual(before);
  expect((await readEvents(nc, iso.names)).filter((e) => e.type === 'reservation.moved')).toEqual(
    [],
  );
  // The live call of the team still moves, and takes the fallback once however often asked.
  for (let i = 0; i < 2; i++) {
    expect(await h.client.moveCapacity(move(live))).toEqual({ ok: true, value: { moved: true } });
  }
  const u = await h.client.usage({});
  if (!u.ok) throw new Error(u.error.message);
  const tokens = Object.fromEntries(u.value.capacity.map((c) => [c.upstream, c.tokens]));
  // default: the rival's and the outsider's calls and the settled one (counted `requested`).
  expect(tokens).toEqual({ default: 1_500, backup: 500 });
}
