import { createHash } from 'node:crypto';
import type { HoldfastEvent } from '@holdfast/events';
import { waitFor } from '@holdfast/testkit';
import { qualified, sql } from '@holdfast/billing-aggregator';
import { expect } from 'vitest';
import { admin, withAdmin } from './admin.js';
import { startTestAggregator, testClickHouse } from './books.js';
import { apps, APP_A, APP_B } from './apps.js';
import { chat, edgeTest as test, type Stack } from './harness.js';
import { CLAUDE } from './surfaces.js';

/**
 * Issue 16 part 2 through the edge: a key's own budgets and each end user's (OpenAI `user`,
 * Anthropic `metadata.user_id`, `x-holdfast-user` from a key that may send it), in answers,
 * headers, /v1/budgets, the admin API, events and ClickHouse.
 */

async function call(
  s: Stack,
  key: string,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
) {
  const res = await fetch(`${s.edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as { error?: { code: string; message: string; param?: string } };
  return { status: res.status, headers: res.headers, body: json };
}

const events = (s: Stack, until: (e: HoldfastEvent[]) => boolean) => s.events(until);

test('an end user over its budget gets a 429 that says so, while the same team serves others', async ({
  stack,
}) => {
  const s = await stack({ patch: apps });
  let refusal: Awaited<ReturnType<typeof call>> | undefined;
  let served = 0;
  for (let i = 0; i < 20 && !refusal; i++) {
    const r = await call(s, APP_B, chat(20, { user: 'alice', max_tokens: 200 }));
    if (r.status === 200) {
      served++;
      expect(r.headers.get('x-holdfast-remaining-user-day-tokens')).not.toBeNull();
      // app-b has no budget of its own: no key header.
      expect(r.headers.get('x-holdfast-remaining-key-day-tokens')).toBeNull();
      expect(r.headers.get('ratelimit-policy')).toContain('"user/day-tokens";q=1500');
    } else refusal = r;
  }
  expect(served).toBeGreaterThan(2);
  expect(refusal?.status).toBe(429);
  expect(refusal?.body.error?.code).toBe('budget_exceeded');
  expect(refusal?.body.error?.message).toContain('end user alice of team apps');
  // bob, and calls that name nobody, are still served.
  expect((await call(s, APP_B, chat(20, { user: 'bob', max_tokens: 200 }))).status).toBe(200);
  expect((await call(s, APP_B, chat(20, { max_tokens: 200 }))).status).toBe(200);
  const usage = await s.settled('apps');
  const alice = usage.endUsers.find((u) => u.id === 'alice')!;
  expect(alice.windows[0]!.used).toBeLessThanOrEqual(1_500);
  expect(alice.windows[0]!.used).toBeGreaterThan(1_500 - 250);
  expect(usage.endUserCount).toBe(2);
});

test('x-holdfast-user: honoured from a key that allows it, a 400 from one that does not', async ({
  stack,
}) => {
  const s = await stack({ patch: apps });
  const named = await call(s, APP_A, chat(10, { user: 'body-user', max_tokens: 20 }), {
    'x-holdfast-user': 'header-user',
  });
  expect(named.status).toBe(200);
  // The key's own budget is reported too.
  expect(named.headers.get('x-holdfast-remaining-key-day-tokens')).not.toBeNull();
  const refused = await call(s, APP_B, chat(10, { max_tokens: 20 }), {
    'x-holdfast-user': 'header-user',
  });
  expect(refused.status).toBe(400);
  expect(refused.body.error).toMatchObject({ code: 'invalid_request', param: 'x-holdfast-user' });
  const all = await events(s, (e) => e.some((x) => x.type === 'reservation.settled'));
  const created = all.filter((e) => e.type === 'reservation.created');
  expect(created).toHaveLength(1);
  expect(created[0]).toMatchObject({ endUser: 'header-user', keyId: 'app-a' });
  const usage = await s.settled('apps');
  expect(usage.endUsers.map((u) => u.id)).toEqual(['header-user']);
  expect(usage.keys).toEqual([
    expect.objectContaining({ id: 'app-a', windows: [expect.objectContaining({ held: 0 })] }),
  ]);
});

test('any end user string maps to one bounded id; none reaches a header or a Redis key raw', async ({
  stack,
}) => {
  const s = await stack({ patch: apps });
  const hostile = [
    'ünïcödé-user',
    'a'.repeat(500),
    'x;y,z',
    'tab\there',
    'evil\r\nx-injected: 1',
    '{org}:t:apps:w:day-tokens',
  ];
  const expected = (raw: string) =>
    /^[\x21-\x2b\x2d-\x3a\x3c-\x7e]{1,128}$/.test(raw)
      ? raw
      : `sha256:${createHash('sha256').update(raw).digest('hex').slice(0, 32)}`;
  for (const user of hostile) {
    const r = await call(s, APP_B, chat(10, { user, max_tokens: 20 }));
    expect(r.status, user).toBe(200);
    expect([...r.headers.keys()].some((h) => h.includes('injected'))).toBe(false);
  }
  const usage = await s.settled('apps');
  expect(usage.endUsers.map((u) => u.id).sort()).toEqual(hostile.map(expected).sort());
  // The team's own month window was charged once per call, not confused with an end user's.
  expect(usage.windows.find((w) => w.budget === 'month-tokens')!.used).toBeGreaterThan(0);
  const all = await events(
    s,
    (e) => e.filter((x) => x.type === 'reservation.settled').length === hostile.length,
  );
  for (const e of all.filter((x) => x.type === 'reservation.settled')) {
    expect('endUser' in e && hostile.map(expected).includes(e.endUser!)).toBe(true);
  }
});

test('the Messages API names the end user in metadata.user_id', async ({ stack }) => {
  const s = await stack({ patch: apps });
  const res = await fetch(`${s.edge.url}/v1/messages`, {
    method: 'POST',
    headers: { 'x-api-key': APP_B, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: CLAUDE,
      max_tokens: 50,
      metadata: { user_id: 'claude-user' },
      messages: [{ role: 'user', content: 'hello there' }],
    }),
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('x-holdfast-remaining-user-day-tokens')).not.toBeNull();
  const usage = await s.settled('apps');
  expect(usage.endUsers.map((u) => u.id)).toEqual(['claude-user']);
});

test('/v1/budgets and the admin API show keys and end users; a key PATCH changes its budgets', async ({
  stack,
}) => {
  const s = await stack(withAdmin({ patch: apps }));
  for (const user of ['u1', 'u2', 'u3']) {
    expect((await call(s, APP_A, chat(10, { user, max_tokens: 20 }))).status).toBe(200);
  }
  await s.settled('apps');
  const budgets = await fetch(`${s.edge.url}/v1/budgets`, {
    headers: { authorization: `Bearer ${APP_B}` },
  });
  const view = (await budgets.json()) as {
    tenants: {
      tenant: string;
      keys: { id: string; windows: { soft: number[] }[] }[];
      endUsers: { id: string; windows: { soft: number[]; remaining: number }[] }[];
      endUserCount: number;
    }[];
  };
  const apps1 = view.tenants.find((t) => t.tenant === 'apps')!;
  expect(apps1.keys.map((k) => k.id)).toEqual(['app-a']);
  expect(apps1.endUsers.map((u) => u.id).sort()).toEqual(['u1', 'u2', 'u3']);
  expect(apps1.endUsers[0]!.windows[0]!.soft).toEqual([0.5]);
  expect(apps1.endUserCount).toBe(3);
  const one = await fetch(`${s.edge.url}/v1/budgets?end_user=u2`, {
    headers: { authorization: `Bearer ${APP_B}` },
  });
  const oneView = (await one.json()) as typeof view;
  expect(oneView.tenants[0]!.endUsers.map((u) => u.id)).toEqual(['u2']);

  const api = admin(s);
  const list = await api('GET', '/admin/tenants/apps/end-users');
  expect(list.status).toBe(200);
  expect(list.body.tracked).toBe(3);
  const u1 = await api('GET', '/admin/tenants/apps/end-users/u1');
  expect(u1.status).toBe(200);
  expect(u1.body.data.windows[0].used).toBeGreaterThan(0);
  expect((await api('GET', '/admin/tenants/apps/end-users/nobody')).status).toBe(404);
  expect((await api('GET', '/admin/tenants/nope/end-users')).status).toBe(404);

  // A key's budgets through the admin API: the tiny new limit refuses the next call.
  const patched = await api('PATCH', '/admin/tenants/apps/keys/app-b', {
    budgets: [{ window: 'day', limit: 10, unit: 'tokens' }],
  });
  expect(patched.status).toBe(200);
  expect(patched.body.data.budgets).toHaveLength(1);
  const bad = await api('PATCH', '/admin/tenants/apps/keys/app-b', {
    budgets: [{ window: 'day', limit: -1, unit: 'tokens' }],
  });
  expect(bad.status).toBe(400);
  const refused = await waitFor(async () => {
    const r = await call(s, APP_B, chat(10, { max_tokens: 20 }));
    return r.status === 429 ? r : undefined;
  });
  expect(refused.body.error?.message).toContain('key app-b of team apps');
});

test('ClickHouse has the end user of every event and one window row per key and end user', async ({
  stack,
  natsUrl,
  clickhouseUrl,
  clickhouse,
  iso,
}) => {
  void clickhouse; // creates the test's database, dropped afterwards
  const s = await stack({ patch: apps });
  const aggregator = await startTestAggregator({
    natsUrl,
    clickhouseUrl,
    names: iso.names,
    database: iso.database,
  });
  const ch = testClickHouse(clickhouseUrl);
  try {
    for (const user of ['carol', 'dave', 'carol']) {
      expect((await call(s, APP_A, chat(10, { user, max_tokens: 20 }))).status).toBe(200);
    }
    const usage = await s.settled('apps');
    const raw = qualified(iso.database, 'events_raw_v1');
    const rows = await waitFor(async () => {
      const r = await ch.query<{ end_user: string; n: string; charged: string }>(sql`
        SELECT end_user, count() AS n, sum(charged_tokens) AS charged FROM ${raw} FINAL
        WHERE tenant = 'apps' AND type = 'reservation.settled' GROUP BY end_user ORDER BY end_user`);
      return r.reduce((n, x) => n + Number(x.n), 0) === 3 ? r : undefined;
    });
    expect(rows.map((r) => [r.end_user, Number(r.n)])).toEqual([
      ['carol', 2],
      ['dave', 1],
    ]);
    // Their windows, named by whose they are, agree with the ledger.
    const states = await ch.query<{ level: string; used: string }>(sql`
      SELECT level, used_now AS used FROM ${qualified(iso.database, 'budget_utilisation_v1')}
      WHERE level LIKE 'apps/%' ORDER BY level`);
    const ledger = Object.fromEntries([
      ...usage.endUsers.map((u) => [`apps/user:${u.id}`, u.windows[0]!.used]),
      ...usage.keys.map((k) => [`apps/key:${k.id}`, k.windows[0]!.used]),
    ]);
    expect(Object.fromEntries(states.map((r) => [r.level, Number(r.used)]))).toEqual(ledger);
  } finally {
    await ch.close();
    await aggregator.stop();
  }
});
