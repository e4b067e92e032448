import { setTimeout as sleep } from 'node:timers/promises';
import { startTestAuthority } from '@holdfast/budget-authority/testing';
import type { HoldfastEvent } from '@holdfast/events';
import { expect, onTestFinished } from 'vitest';
import { sha256Hex, startEdge } from '../src/index.js';
import { chat, edgeTest as test, nothingHeldAnywhere, type TestConfig } from './harness.js';
import { CLAUDE, post, withClaude } from './surfaces.js';

/**
 * Red team, end users of one team from a client holding a valid key: one end user's calls at
 * once through two edges and two authorities, at the edge of the end user's, the key's and the
 * team's limits; and new end users on calls that bill nothing, which take no place in
 * maxEndUsers.
 */

const A = 'sk-hf-eu-a';
const B = 'sk-hf-eu-b';
const LIMITS = { user: 1_200, key: 1_000, team: 2_500 } as const;
const CLOSES = ['reservation.settled', 'reservation.released', 'reservation.expired'];

/** Team `eu`: each end user 1,200 tokens a day, key eu-a 1,000, the team 2,500. */
function team(mode: 'reserve' | 'adaptive', models = ['gpt-4o-mini']) {
  return (c: TestConfig): void => {
    withClaude(c);
    c.tenants.push({
      id: 'eu',
      mode,
      maxInFlight: 128,
      budgets: [{ window: 'month', limit: LIMITS.team, unit: 'tokens' }],
      endUserBudgets: [{ window: 'day', limit: LIMITS.user, unit: 'tokens' }],
      useCases: [{ id: 'uc', maxTokens: 200, models }],
      keys: [
        {
          id: 'eu-a',
          sha256: sha256Hex(A),
          allowUserHeader: true,
          budgets: [{ window: 'day', limit: LIMITS.key, unit: 'tokens' }],
        },
        { id: 'eu-b', sha256: sha256Hex(B) },
      ],
    });
  };
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

for (const mode of ['reserve', 'adaptive'] as const) {
  const title = `${mode}: 64 calls at once, half for one end user, through two edges and two authorities: no end user, key or team passes its limit; every admission closed once`;
  test(title, async ({ stack, nc, natsUrl, redisUrl, redis, iso }) => {
    const s = await stack({
      patch: team(mode),
      behaviour: { tokenDelayMs: 1, completion: { mode: 'uniform', min: 10, max: 200 } },
    });
    const second = await startTestAuthority({ natsUrl, redisUrl, nc, ...iso, clock: false });
    onTestFinished(() => second.stop());
    const other = await startEdge({ nc, names: iso.names, options: { admitTimeoutMs: 10_000 } });
    onTestFinished(() => other.stop());
    const edges = [s.edge.url, other.url];

    // carol through both keys (x-holdfast-user on eu-a, the body's user on eu-b), dave on eu-a,
    // erin on eu-b: carol's, eu-a's and the team's limits are each within reach.
    const call = async (i: number) => {
      const who = i % 2 === 0 ? 'carol' : i % 4 === 1 ? 'dave' : 'erin';
      const viaA = who === 'dave' || (who === 'carol' && i % 4 === 0);
      const headers = viaA
        ? { ...bearer(A), ...(who === 'carol' ? { 'x-holdfast-user': 'carol' } : {}) }
        : bearer(B);
      const body = chat(20, {
        max_tokens: 60 + ((i * 37) % 140),
        stream: i % 3 === 0,
        ...(viaA && who === 'carol' ? {} : { user: who }),
      });
      const res = await fetch(`${edges[i % 2]!}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
      await res.text();
      return res;
    };
    const statuses: number[] = [];
    // Three rounds: adaptive learns its estimate from the first; the last are at the limits.
    for (let round = 0; round < 3; round++) {
      const results = await Promise.all(Array.from({ length: 64 }, (_, i) => call(i)));
      statuses.push(...results.map((r) => r.status));
      await sleep(50);
    }
    expect(statuses.filter((c) => c !== 200 && c !== 429)).toEqual([]);
    expect(statuses.filter((c) => c === 429).length).toBeGreaterThan(0);

    const u = await s.settled('eu');
    await nothingHeldAnywhere(redis, iso.keyPrefix);
    const used = (ws: { used: number }[]) => ws[0]!.used;
    const users = new Map(u.endUsers.map((e) => [e.id, used(e.windows)]));
    const keyA = used(u.keys.find((k) => k.id === 'eu-a')!.windows);
    expect(used(u.windows)).toBeLessThanOrEqual(LIMITS.team);
    expect(keyA).toBeLessThanOrEqual(LIMITS.key);
    for (const [id, n] of users) expect(n, id).toBeLessThanOrEqual(LIMITS.user);
    const billed = s.upstream.stats().billed;
    expect(used(u.windows)).toBe(billed.promptTokens + billed.completionTokens);
    expect([...users.values()].reduce((a, b) => a + b, 0)).toBe(used(u.windows));

    const events = await s.events((es) => {
      const created = es.filter((e) => e.type === 'reservation.created').length;
      return created > 0 && created === es.filter((e) => CLOSES.includes(e.type)).length;
    });
    const ids = (types: string[]) =>
      events.flatMap((e: HoldfastEvent) =>
        types.includes(e.type) && 'reservationId' in e ? [e.reservationId] : [],
      );
    expect(new Set(ids(CLOSES))).toEqual(new Set(ids(['reservation.created'])));
    expect(ids(CLOSES)).toHaveLength(new Set(ids(CLOSES)).size);
    expect(events.filter((e) => e.type === 'reservation.overrun')).toEqual([]);
  });
}

test("calls the upstream refuses take no place in maxEndUsers: a key naming a new end user on each leaves the team's registry as it found it", async ({
  stack,
  redis,
  iso,
}) => {
  const s = await stack({
    patch: (c) => {
      team('reserve')(c);
      const eu = c.tenants.find((t) => t.id === 'eu')!;
      eu.maxEndUsers = 3;
      (eu.keys as { maxEndUsers?: number }[])[0]!.maxEndUsers = 1;
    },
  });
  const ask = (user: string, key = B) =>
    post(
      s,
      '/v1/chat/completions',
      chat(10, { max_tokens: 20, user }),
      key === A ? { ...bearer(A), 'x-holdfast-user': user } : bearer(key),
    );
  expect((await ask('carol')).status).toBe(200);

  // A new end user on every call, each failed by the upstream (a 5xx on every attempt bills
  // nothing), through both keys (eu-a has a maxEndUsers of its own): nothing tracked, no
  // window left.
  s.upstream.failNext({ status: 500, count: 100 });
  for (const user of ['m1', 'm2']) {
    for (const key of [A, B]) {
      const r = await ask(`${user}-${key}`, key);
      expect(r.status, JSON.stringify(r.body)).toBeGreaterThanOrEqual(500);
      await s.settled('eu');
    }
  }
  // A tracked end user's failed call keeps it tracked.
  expect((await ask('carol')).status).toBeGreaterThanOrEqual(500);
  s.upstream.reset();
  const u = await s.settled('eu');
  expect(u.endUserCount).toBe(1);
  expect(u.endUsers.map((e) => e.id)).toEqual(['carol']);
  const left = await redis.keys(`${iso.keyPrefix}:*:u:eu:m*`);
  expect(left).toEqual([]);
  expect(await redis.zrange(`${iso.keyPrefix}:{eu}:k:eu:eu-a:users`, 0, -1)).toEqual([]);

  // The team's and the key's room is still there for end users the model serves.
  for (const [user, key] of [
    ['dave', A],
    ['erin', B],
  ] as const) {
    const r = await ask(user, key);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
  }
  expect((await ask('frank', A)).status).toBe(429);
  expect((await ask('gina')).status).toBe(429);
  await nothingHeldAnywhere(redis, iso.keyPrefix);
});

test('chat and embeddings: an end user that is not a string is a 400 naming the field; nothing held or sent', async ({
  stack,
}) => {
  const s = await stack({ patch: team('reserve', ['gpt-4o-mini', 'text-embedding-3-small']) });
  const bodies: [string, string, Record<string, unknown>][] = [];
  for (const user of [7, true, { id: 'carol' }, ['carol'], 'u'.repeat(513)]) {
    bodies.push(['/v1/chat/completions', 'user', chat(10, { max_tokens: 20, user })]);
    bodies.push([
      '/v1/chat/completions',
      'safety_identifier',
      chat(10, { safety_identifier: user }),
    ]);
    bodies.push(['/v1/embeddings', 'user', { model: 'text-embedding-3-small', input: 'hi', user }]);
  }
  for (const [path, field, body] of bodies) {
    const r = await post(s, path, body, bearer(B));
    expect(r.status, `${path} ${JSON.stringify(body[field])}`).toBe(400);
    expect(r.body.error, path).toMatchObject({ code: 'invalid_request', param: field });
  }
  expect(s.upstream.stats().recent).toEqual([]);
  const u = await s.settled('eu');
  expect([u.endUserCount, u.windows[0]!.used]).toEqual([0, 0]);
});

test("an end user in astral characters (𝐀, 🧾: two UTF-16 units each) is measured in characters by the edge and the authority alike: at the field's limit it is one end user, served and settled; one past it, one 400 naming the field, nothing held or sent", async ({
  stack,
  redis,
  iso,
}) => {
  // zod (the edge's bodies, the authority's requests) and ajv (their fast checks) both count
  // code points: a string between the limit and twice it in UTF-16 units must not pass one and
  // fail the other (the edge admitting an end user the authority refuses, after a count).
  const s = await stack({ patch: team('reserve', ['gpt-4o-mini', CLAUDE]) });
  const fields: [string, number, (user: string) => Record<string, unknown>][] = [
    ['user', 512, (user) => chat(10, { max_tokens: 20, user })],
    ['safety_identifier', 512, (user) => chat(10, { max_tokens: 20, safety_identifier: user })],
    [
      'responses user',
      512,
      (user) => ({ model: 'gpt-4o-mini', input: 'hi', max_output_tokens: 20, user }),
    ],
    [
      'metadata.user_id',
      256,
      (user) => ({
        model: CLAUDE,
        max_tokens: 20,
        messages: [{ role: 'user', content: 'hi' }],
        metadata: { user_id: user },
      }),
    ],
  ];
  const path = (field: string) =>
    field === 'metadata.user_id'
      ? '/v1/messages'
      : field.startsWith('responses')
        ? '/v1/responses'
        : '/v1/chat/completions';
  let served = 0;
  for (const [field, limit, body] of fields) {
    for (const ch of ['𝐀', '🧾']) {
      const at = ch.repeat(limit);
      expect(at.length, field).toBe(2 * limit);
      const ok = await post(s, path(field), body(at), bearer(B));
      expect(ok.status, `${field} ${ch} x ${limit}`).toBe(200);
      served++;
      const past = await post(s, path(field), body(ch.repeat(limit + 1)), bearer(B));
      expect(past.status, `${field} ${ch} x ${limit + 1}`).toBe(400);
      expect(JSON.stringify(past.body), field).toContain(field.split(' ').at(-1)!);
    }
  }
  expect(s.upstream.stats().recent).toHaveLength(served);
  const u = await s.settled('eu');
  // Each string at its limit is one end user (the hashed form: not plain ASCII), the same on
  // any field: 𝐀 and 🧾 512 times (chat, Responses) and 256 times (Messages).
  expect(u.endUsers.every((e) => /^sha256:[0-9a-f]{32}$/.test(e.id))).toBe(true);
  expect(u.endUserCount).toBe(4);
  await nothingHeldAnywhere(redis, iso.keyPrefix);
});
