import { endUserFilterOf, endUserSet, mayTrack, type HoldfastEvent } from '@holdfast/events';
import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import {
  chat,
  edgeTest as test,
  entry,
  KEYS,
  tenantMetric,
  testConfig,
  type Stack,
  type StackOptions,
  type TestConfig,
} from './harness.js';

/**
 * A tenant over its budget that keeps calling: the edge answers the repeats of a budget
 * refusal itself (authority/refusal-memory.ts), and every refusal still ends in an event,
 * counted once. Real NATS and Redis, the mock upstream.
 */

const tight = (limit: number) => (c: TestConfig) => {
  entry(c.tenants, 'support-bot').budgets = [{ window: 'month', limit, unit: 'tokens' }];
};

/** Refusals of `tenant` in the events, each summary counted for its `count`. */
function refusalsIn(events: HoldfastEvent[], tenant: string, code = 'budget_exceeded'): number {
  let n = 0;
  for (const e of events) {
    if (e.type === 'admission.refused' && e.tenant === tenant && e.code === code) n += e.count;
  }
  return n;
}

/** The authority's own refusals of `code` (the admits it ran that refused so). */
async function authorityRefusals(s: Stack, code = 'budget_exceeded'): Promise<number> {
  const m = await s.authority.ctx.metrics.admissions.get();
  return m.values
    .filter((v) => v.labels.outcome === 'refused' && v.labels.code === code)
    .reduce((n, v) => n + v.value, 0);
}

/** A stack whose support-bot is suspended, remembering refusals for a minute. */
async function suspended(stack: (o?: StackOptions) => Promise<Stack>): Promise<Stack> {
  const s = await stack({ edge: { options: { refusals: { memoryMs: 60_000, reportMs: 50 } } } });
  const done = await s.client.suspend({ tenant: 'support-bot', reason: 'test', by: 'admin' });
  expect(done.ok).toBe(true);
  return s;
}

/** A raw call: status, headers and body as the client sees them. */
async function post(s: Stack, key: string, body: unknown, headers: Record<string, string> = {}) {
  const r = await fetch(`${s.edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: r.status, headers: r.headers, body: (await r.json()) as { error?: unknown } };
}

test('a flood of repeats is answered at the edge with the authority’s refusal; every one is an event', async ({
  stack,
}) => {
  const s = await stack({
    patch: tight(200),
    edge: { options: { refusals: { memoryMs: 10_000, reportMs: 50 } } },
  });
  // More than the whole budget: waiting cannot help (no Retry-After).
  const call = { ...chat(10), max_tokens: 500 };
  const first = await post(s, KEYS.support, call);
  expect(first.status).toBe(429);
  const n = 300;
  const answers: Array<Awaited<ReturnType<typeof post>>> = [];
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (answers.length < n) {
        answers.push(await post(s, KEYS.support, { ...call, max_tokens: 500 + answers.length }));
      }
    }),
  );
  const total = answers.length;
  // The same answer as the authority's, body and headers, but for the message's note that the
  // call is larger than the one refused.
  for (const a of answers) {
    expect(a.status).toBe(429);
    expect(a.headers.get('x-should-retry')).toBe(first.headers.get('x-should-retry'));
    expect(a.headers.get('ratelimit')).toBe(first.headers.get('ratelimit'));
    expect(a.body.error).toMatchObject({
      code: 'budget_exceeded',
      type: (first.body.error as { type: string }).type,
    });
  }
  // The authority decided once; the edge answered the rest and says so.
  expect(await authorityRefusals(s)).toBe(1);
  expect(await tenantMetric(s, 'edge_local_refusals_total', 'support-bot')).toBe(total);
  expect(s.upstream.stats().recent).toHaveLength(0);
  // Books: every refusal counted once, in a handful of events.
  const events = await s.events((e) => refusalsIn(e, 'support-bot') >= total + 1);
  expect(refusalsIn(events, 'support-bot')).toBe(total + 1);
  // Summaries: as many events as the sweeper's flushes during the flood, not one per refusal.
  expect(events.filter((e) => e.type === 'admission.refused').length).toBeLessThan(total / 4);
  expect(await s.authority.ctx.metrics.refusalsReported.get()).toMatchObject({
    values: [expect.objectContaining({ value: total })],
  });
  // Another tenant is untouched.
  const other = await post(s, KEYS.batch, { ...chat(10), max_tokens: 5 });
  expect(other.status).toBe(200);
});

test('a smaller call, another key or another model is still asked of the authority', async ({
  stack,
}) => {
  const s = await stack({
    patch: tight(200),
    edge: { options: { refusals: { memoryMs: 10_000, reportMs: 50 } } },
  });
  expect((await post(s, KEYS.support, { ...chat(10), max_tokens: 500 })).status).toBe(429);
  // Needs less: fits, served.
  expect((await post(s, KEYS.support, { ...chat(10), max_tokens: 20 })).status).toBe(200);
  expect(await tenantMetric(s, 'edge_local_refusals_total', 'support-bot')).toBe(0);
});

test('a config that raises the limit is honoured at once, not after the memory', async ({
  stack,
}) => {
  const s = await stack({
    patch: tight(200),
    edge: { options: { refusals: { memoryMs: 60_000, reportMs: 50 } } },
  });
  const call = { ...chat(10), max_tokens: 500 };
  expect((await post(s, KEYS.support, call)).status).toBe(429);
  expect((await post(s, KEYS.support, call)).status).toBe(429);
  expect(await tenantMetric(s, 'edge_local_refusals_total', 'support-bot')).toBe(1);
  const applied = await s.client.configApply({
    document: testConfig(s.upstream.url, tight(2_000)),
  });
  expect(applied.ok).toBe(true);
  await s.edge.app.configSnapshot.refresh();
  expect((await post(s, KEYS.support, call)).status).toBe(200);
});

test('a call of the team that closes on this edge gives its room back at once', async ({
  stack,
}) => {
  const s = await stack({
    patch: tight(800),
    behaviour: { completion: { mode: 'fixed', tokens: 40 }, tokenDelayMs: 20 },
    edge: { options: { refusals: { memoryMs: 60_000, reportMs: 50 } } },
  });
  // Holds about 530 of the 800 while it runs (0.8 s; the use case clamps it to 512), bills
  // about 60.
  const running = post(s, KEYS.support, { ...chat(10), max_tokens: 512 });
  await waitFor(async () => (await s.usage('support-bot')).inFlight === 1 || undefined, {
    what: 'the first call to be admitted',
  });
  const big = { ...chat(10), max_tokens: 400 };
  const refused = await post(s, KEYS.support, big);
  expect(refused.status).toBe(429);
  // In flight holds it: the Retry-After is a second, so the memory's bound is that second.
  expect(refused.headers.get('retry-after')).toBe('1');
  expect(s.edge.app.refusals.size).toBe(1);
  expect((await running).status).toBe(200);
  await s.settled('support-bot');
  // Its settle was answered on this edge: the refusal is forgotten (an expired one stays in the
  // map until it is looked up), the call fits now.
  await waitFor(() => s.edge.app.refusals.size === 0 || undefined, {
    what: 'the refusal forgotten',
  });
  expect((await post(s, KEYS.support, big)).status).toBe(200);
  const events = await s.events(
    (e) => e.filter((x) => x.type === 'reservation.settled').length === 2,
  );
  expect(refusalsIn(events, 'support-bot')).toBe(
    1 + (await tenantMetric(s, 'edge_local_refusals_total', 'support-bot')),
  );
});

test('the authority away mid-flood: refusals answered at the edge are counted once it is back, none twice', async ({
  stack,
}) => {
  // Reports every 5 s: the repeats below wait for one, and the authority goes away first.
  const s = await stack({
    patch: tight(200),
    edge: { options: { refusals: { memoryMs: 60_000, reportMs: 5_000 } } },
  });
  const call = { ...chat(10), max_tokens: 500 };
  expect((await post(s, KEYS.support, call)).status).toBe(429);
  const waiting = Array.from({ length: 20 }, () => post(s, KEYS.support, call));
  await waitFor(
    async () =>
      (await tenantMetric(s, 'edge_local_refusals_total', 'support-bot')) === 20 || undefined,
    { what: 'the repeats answered at the edge, waiting for their report' },
  );
  await s.stopAuthority();
  // The report is not taken: each client gets its refusal all the same.
  const answered = await Promise.all(waiting);
  expect(answered.every((r) => r.status === 429)).toBe(true);
  // And the edge stops answering refusals itself: the authority is away, so it fails closed.
  expect((await post(s, KEYS.support, call)).status).toBe(503);
  await s.restartAuthority();
  const back = Date.now();
  // The authority's start notice sends the counts at once (the backoff would be 5 s), under the
  // same item id: counted once.
  const events = await s.events((e) => refusalsIn(e, 'support-bot') >= 21);
  expect(Date.now() - back).toBeLessThan(4_000);
  expect(refusalsIn(events, 'support-bot')).toBe(21);
  await new Promise((r) => setTimeout(r, 1_500));
  expect(refusalsIn(await s.events(), 'support-bot')).toBe(21);
});

test('a team at its org’s cap on calls in flight: repeats are answered at the edge until a call of the org closes', async ({
  stack,
}) => {
  const s = await stack({
    behaviour: { completion: { mode: 'fixed', tokens: 40 }, tokenDelayMs: 20 },
    edge: { options: { refusals: { memoryMs: 60_000, reportMs: 50 } } },
    patch: (c) => {
      c.tenants.push({ id: 'acme', maxInFlight: 1 });
      entry(c.tenants, 'support-bot').parent = 'acme';
      entry(c.tenants, 'finance-ops').parent = 'acme';
    },
  });
  // finance-ops takes the org's one slot for about 0.8 s.
  const running = post(s, KEYS.finance, { ...chat(10), max_tokens: 40 });
  await waitFor(async () => (await s.usage('finance-ops')).inFlight === 1 || undefined, {
    what: 'the first call to be admitted',
  });
  // support-bot has no cap of its own, so the edge lets it through; the authority refuses it.
  const first = await post(s, KEYS.support, { ...chat(10), max_tokens: 40 });
  expect(first.status).toBe(429);
  expect(first.body.error).toMatchObject({ code: 'concurrency_limit' });
  // A repeat, even a smaller one, is answered at the edge.
  const repeat = await post(s, KEYS.support, { ...chat(5), max_tokens: 5 });
  expect(repeat.status).toBe(429);
  expect(await tenantMetric(s, 'edge_local_refusals_total', 'support-bot')).toBe(1);
  expect((await running).status).toBe(200);
  await s.settled('finance-ops');
  await waitFor(() => s.edge.app.refusals.size === 0 || undefined, {
    what: 'the refusal forgotten',
  });
  expect((await post(s, KEYS.support, { ...chat(10), max_tokens: 40 })).status).toBe(200);
  const events = await s.events((e) => refusalsIn(e, 'support-bot', 'concurrency_limit') >= 2);
  expect(refusalsIn(events, 'support-bot', 'concurrency_limit')).toBe(2);
});

test('a suspended team: repeats are answered at the edge until its tenant.resumed', async ({
  stack,
}) => {
  const s = await suspended(stack);
  const first = await post(s, KEYS.support, { ...chat(10), max_tokens: 40 });
  expect(first.status).toBe(403);
  expect(first.body.error).toMatchObject({ code: 'tenant_suspended' });
  // Any repeat, even a smaller one, is answered at the edge.
  const repeat = await post(s, KEYS.support, { ...chat(5), max_tokens: 5 });
  expect(repeat.status).toBe(403);
  expect(await tenantMetric(s, 'edge_local_refusals_total', 'support-bot')).toBe(1);
  // Resumed through the authority's API (not this edge's admin API): the event tells the edge.
  expect((await s.client.resume({ tenant: 'support-bot', by: 'admin' })).ok).toBe(true);
  await waitFor(() => s.edge.app.refusals.size === 0 || undefined, {
    what: 'the suspension forgotten',
  });
  expect((await post(s, KEYS.support, { ...chat(10), max_tokens: 40 })).status).toBe(200);
  const events = await s.events((e) => refusalsIn(e, 'support-bot', 'tenant_suspended') >= 2);
  expect(refusalsIn(events, 'support-bot', 'tenant_suspended')).toBe(2);
});

test('a flood naming a new end user on every call is answered at the edge when the team’s own limit refuses', async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      tight(200)(c);
      // End users of the team have budgets of their own, of the same id (month-tokens): the
      // refusal below is still the team's.
      entry(c.tenants, 'support-bot').endUserBudgets = [
        { window: 'month', limit: 1_000_000, unit: 'tokens' },
      ];
    },
    edge: { options: { refusals: { memoryMs: 10_000, reportMs: 50 } } },
  });
  const call = (user: string) => ({ ...chat(10), max_tokens: 500, user });
  const first = await post(s, KEYS.support, call('alice'));
  expect(first.status).toBe(429);
  expect(first.headers.get('x-holdfast-remaining-user-month-tokens')).not.toBeNull();
  // Every repeat names another end user (the OpenAI `user` field: any client sets it).
  const n = 200;
  const answers: Array<Awaited<ReturnType<typeof post>>> = [];
  let sent = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (sent < n) answers.push(await post(s, KEYS.support, call(`user-${sent++}`)));
    }),
  );
  for (const a of answers) {
    expect(a.status).toBe(429);
    expect(a.body.error).toMatchObject({ code: 'budget_exceeded' });
    // The team's windows as the authority gave them, never alice's own.
    expect(a.headers.get('x-holdfast-remaining-month-tokens')).toBe(
      first.headers.get('x-holdfast-remaining-month-tokens'),
    );
    expect(a.headers.get('x-holdfast-remaining-user-month-tokens')).toBeNull();
  }
  // alice's own repeat is answered as the authority answered her.
  const again = await post(s, KEYS.support, call('alice'));
  expect(again.headers.get('ratelimit')).toBe(first.headers.get('ratelimit'));
  // Before: each of the 200 was an admit in Redis (the memory is keyed by end user).
  expect(await authorityRefusals(s)).toBe(1);
  expect(await tenantMetric(s, 'edge_local_refusals_total', 'support-bot')).toBe(n + 1);
  const events = await s.events((e) => refusalsIn(e, 'support-bot') >= n + 2);
  expect(refusalsIn(events, 'support-bot')).toBe(n + 2);
});

test('a suspended team naming a new end user or use case on every call is answered at the edge', async ({
  stack,
}) => {
  const s = await suspended(stack);
  expect((await post(s, KEYS.support, { ...chat(10), max_tokens: 40, user: 'u0' })).status).toBe(
    403,
  );
  const n = 100;
  for (let i = 1; i <= n; i++) {
    const r = await post(
      s,
      KEYS.support,
      { ...chat(10), max_tokens: 40, user: `u${i}` },
      // Every other call names a use case the team does not have (asked `uncounted` before).
      i % 2 ? {} : { 'x-use-case': `UC-${900 + i}` },
    );
    expect(r.status).toBe(403);
  }
  expect(await authorityRefusals(s, 'tenant_suspended')).toBe(1);
  expect(await tenantMetric(s, 'edge_local_refusals_total', 'support-bot')).toBe(n);
});

test('an end user’s own budget refusal is still its own: another end user is served', async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      entry(c.tenants, 'support-bot').endUserBudgets = [
        { window: 'day', limit: 100, unit: 'tokens' },
      ];
    },
    edge: { options: { refusals: { memoryMs: 60_000, reportMs: 50 } } },
  });
  const call = (user: string) => ({ ...chat(10), max_tokens: 200, user });
  expect((await post(s, KEYS.support, call('alice'))).status).toBe(429);
  expect((await post(s, KEYS.support, call('alice'))).status).toBe(429);
  expect(await tenantMetric(s, 'edge_local_refusals_total', 'support-bot')).toBe(1);
  const small = (user: string) => ({ ...chat(10), max_tokens: 20, user });
  expect((await post(s, KEYS.support, small('bob'))).status).toBe(200);
  expect((await post(s, KEYS.support, call('bob'))).status).toBe(429);
  expect(await authorityRefusals(s)).toBe(2);
});

test('a flood naming a model or use case the team does not have is answered at the edge until a config registers it; every one is an event', async ({
  stack,
}) => {
  let patch = (_: TestConfig) => {};
  const s = await stack({
    patch: (c) => patch(c),
    edge: { options: { refusals: { memoryMs: 60_000, reportMs: 50 } } },
  });
  const team = 'batch-summariser';
  // Each call makes up a new name (and a new end user).
  const model = (i: number) =>
    post(s, KEYS.batch, { ...chat(10), model: `gpt-${i}`, user: `user-${i}` });
  const useCase = (i: number, uc = `UC-${900 + i}`) =>
    post(s, KEYS.batch, { ...chat(10), user: `user-${i}` }, { 'x-use-case': uc });
  expect((await model(0)).body.error).toMatchObject({ code: 'model_not_allowed' });
  expect((await useCase(0)).body.error).toMatchObject({ code: 'use_case_not_registered' });
  const n = 200;
  let sent = 0;
  const answers: Array<{ i: number; error: unknown }> = [];
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (sent < n) {
        const i = ++sent;
        answers.push({ i, error: (await (i % 2 ? model : useCase)(i)).body.error });
      }
    }),
  );
  // Each answer names its own call's use case or model, as the authority words it.
  for (const { i, error } of answers) {
    expect(error).toMatchObject(
      i % 2
        ? {
            code: 'model_not_allowed',
            message: `Model "gpt-${i}" is not allowed for use case "UC-112" of team ${team}.`,
          }
        : {
            code: 'use_case_not_registered',
            message: `Use case "UC-${900 + i}" is not registered for team ${team}.`,
          },
    );
  }
  // Before: each of the 200 was asked of the authority (a refusal script in Redis each).
  expect(await authorityRefusals(s, 'model_not_allowed')).toBe(1);
  expect(await authorityRefusals(s, 'use_case_not_registered')).toBe(1);
  expect(await tenantMetric(s, 'edge_local_refusals_total', team)).toBe(n);
  const events = await s.events(
    (e) =>
      refusalsIn(e, team, 'model_not_allowed') + refusalsIn(e, team, 'use_case_not_registered') >=
      n + 2,
  );
  expect(refusalsIn(events, team, 'model_not_allowed')).toBe(n / 2 + 1);
  expect(refusalsIn(events, team, 'use_case_not_registered')).toBe(n / 2 + 1);
  // A config that registers the use case is honoured at once.
  patch = (c) => {
    (entry(c.tenants, team).useCases as unknown[]).push({
      id: 'UC-999',
      maxTokens: 64,
      models: ['gpt-4o-mini'],
    });
  };
  await s.applyConfig();
  await s.edge.app.configSnapshot.refresh();
  expect((await useCase(1, 'UC-999')).status).toBe(200);
});

/** support-bot's end users with budgets of their own, at most `maxEndUsers` of them. */
function tracking(c: TestConfig, maxEndUsers: number): void {
  const team = entry(c.tenants, 'support-bot');
  team.endUserBudgets = [{ window: 'month', limit: 1_000_000, unit: 'tokens' }];
  team.maxEndUsers = maxEndUsers;
}

test('a team at its maxEndUsers naming a new end user on every call is answered at the edge; its tracked end users are still admitted', async ({
  stack,
}) => {
  let cap = 2;
  const s = await stack({
    patch: (c) => tracking(c, cap),
    edge: { options: { refusals: { memoryMs: 60_000, reportMs: 50 } } },
  });
  const call = (user: string) => ({ ...chat(10), max_tokens: 20, user });
  const admitted = async () => {
    const m = await s.authority.ctx.metrics.admissions.get();
    return m.values.filter((v) => v.labels.outcome === 'admitted').reduce((n, v) => n + v.value, 0);
  };
  // alice and bob take the team's two end users; carol is one too many.
  expect((await post(s, KEYS.support, call('alice'))).status).toBe(200);
  expect((await post(s, KEYS.support, call('bob'))).status).toBe(200);
  const first = await post(s, KEYS.support, call('carol'));
  expect(first.status).toBe(429);
  expect(first.body.error).toMatchObject({ code: 'end_user_limit' });
  const admits = await admitted();
  // Every call names another new end user (the OpenAI `user` field: any client sets it), while
  // alice and bob keep calling (their calls close on this edge).
  const n = 200;
  const answers: Array<Awaited<ReturnType<typeof post>>> = [];
  const tracked: number[] = [];
  let sent = 0;
  await Promise.all([
    ...Array.from({ length: 16 }, async () => {
      while (sent < n) answers.push(await post(s, KEYS.support, call(`user-${sent++}`)));
    }),
    (async () => {
      for (let i = 0; i < 10; i++) {
        tracked.push((await post(s, KEYS.support, call(i % 2 ? 'alice' : 'bob'))).status);
      }
    })(),
  ]);
  // The authority's answer: status, code, body, Retry-After (none: waiting does not help).
  for (const a of answers) {
    expect(a.status).toBe(429);
    expect(a.body).toStrictEqual(first.body);
    expect(a.headers.get('retry-after')).toBe(first.headers.get('retry-after'));
    expect(a.headers.get('x-should-retry')).toBe(first.headers.get('x-should-retry'));
    // The same windows (their remaining amounts as of the refusal remembered).
    expect(a.headers.get('ratelimit-policy')).toBe(first.headers.get('ratelimit-policy'));
  }
  expect(tracked).toStrictEqual(Array.from({ length: 10 }, () => 200));
  // Before: each of the 200 was an admit in Redis (the edge cannot tell a new end user).
  expect(await authorityRefusals(s, 'end_user_limit')).toBe(1);
  expect(await admitted()).toBe(admits + 10);
  expect(await tenantMetric(s, 'edge_local_refusals_total', 'support-bot')).toBe(n);
  const events = await s.events((e) => refusalsIn(e, 'support-bot', 'end_user_limit') >= n + 1);
  expect(refusalsIn(events, 'support-bot', 'end_user_limit')).toBe(n + 1);
  // A config that raises the cap is honoured at once.
  cap = 3;
  await s.applyConfig();
  await s.edge.app.configSnapshot.refresh();
  expect((await post(s, KEYS.support, call('dave'))).status).toBe(200);
});

test('a team at the default maxEndUsers (10,000) naming a new end user on every call is answered at the edge but for the filter’s rare false positives; its tracked end users are still admitted', async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => tracking(c, 10_000),
    edge: { options: { refusals: { memoryMs: 60_000, reportMs: 50 } } },
  });
  const call = (user: string) => ({ ...chat(10), max_tokens: 20, user });
  expect((await post(s, KEYS.support, call('alice'))).status).toBe(200);
  expect((await post(s, KEYS.support, call('bob'))).status).toBe(200);
  // 9,998 more end users, seen just now: the team tracks its 10,000.
  const { redis, keys } = s.authority.ctx;
  const users = keys.users('support-bot', 'support-bot');
  expect(await redis.zcard(users)).toBe(2);
  const now = Date.now();
  await redis.zadd(users, ...Array.from({ length: 9_998 }, (_, i) => [now, `seed-${i}`]).flat());
  const first = await post(s, KEYS.support, call('carol'));
  expect(first.status).toBe(429);
  expect(first.body.error).toMatchObject({ code: 'end_user_limit' });
  // Which new end users the team's filter holds by chance (asked of the authority, refused).
  const filter = endUserSet(endUserFilterOf(await redis.zrange(users, 0, -1)));
  const n = 300;
  const names = Array.from({ length: n }, (_, i) => `user-${i}`);
  const chance = names.filter((u) => mayTrack(filter, u)).length;
  const answers: Array<Awaited<ReturnType<typeof post>>> = [];
  const tracked: number[] = [];
  let sent = 0;
  await Promise.all([
    ...Array.from({ length: 16 }, async () => {
      while (sent < n) answers.push(await post(s, KEYS.support, call(names[sent++]!)));
    }),
    (async () => {
      for (const u of ['alice', 'bob', 'seed-17', 'seed-9000', 'alice', 'seed-17']) {
        tracked.push((await post(s, KEYS.support, call(u))).status);
      }
    })(),
  ]);
  for (const a of answers) {
    expect(a.status).toBe(429);
    expect(a.body.error).toMatchObject({ code: 'end_user_limit' });
  }
  expect(tracked).toStrictEqual([200, 200, 200, 200, 200, 200]);
  // Before: each of the 300 was an admit in Redis (more end users than the authority named).
  expect(chance).toBeLessThanOrEqual(3);
  expect(await authorityRefusals(s, 'end_user_limit')).toBe(1 + chance);
  expect(await tenantMetric(s, 'edge_local_refusals_total', 'support-bot')).toBe(n - chance);
  const events = await s.events((e) => refusalsIn(e, 'support-bot', 'end_user_limit') >= n + 1);
  expect(refusalsIn(events, 'support-bot', 'end_user_limit')).toBe(n + 1);
});
