import { expect } from 'vitest';
import { ADMIN_TOKEN, ids, withAdmin } from './admin.js';
import { apps, APP_B } from './apps.js';
import { chat, edgeTest as test, entry, KEYS, type Stack, type TestConfig } from './harness.js';
import { sessionCookieOf, signIn } from './session.js';

/** The teams under an org `acme` with a budget of its own. */
const withOrg = (c: TestConfig) => {
  c.tenants.push({ id: 'acme', budgets: [{ window: 'day', limit: 500_000, unit: 'tokens' }] });
  entry(c.tenants, 'batch-summariser').parent = 'acme';
  entry(c.tenants, 'support-bot').parent = 'acme';
};

function budgets(s: Stack, headers: Record<string, string>, query = '') {
  return s.edge.app.inject({ method: 'GET', url: `/v1/budgets${query}`, headers });
}
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

test('/v1/budgets: a key sees its own tenant and the levels above it, never another tenant', async ({
  stack,
}) => {
  const s = await stack(withAdmin({ patch: withOrg }));
  await s.openai(KEYS.batch).chat.completions.create(chat(20, { max_tokens: 10 }));
  await s.openai(KEYS.support).chat.completions.create(chat(20, { max_tokens: 10 }));
  await s.settled('batch-summariser');

  const mine = await budgets(s, bearer(KEYS.batch));
  expect(mine.statusCode).toBe(200);
  expect(mine.headers['cache-control']).toBe('no-store');
  const body = mine.json();
  expect(body).toMatchObject({ object: 'budgets', scope: 'tenant' });
  expect(ids(body.tenants, 'tenant')).toEqual(['batch-summariser']);
  expect(mine.body).not.toContain('support-bot');
  expect(mine.body).not.toContain('finance-ops');

  // The numbers are the authority's ledger, with the thresholds and what is left.
  const ledger = await s.usage('batch-summariser');
  const [team, org] = body.tenants[0].windows;
  expect(team).toEqual({
    ...ledger.windows[0],
    soft: [0.8, 0.95],
    remaining: 40_000 - ledger.windows[0]!.used,
  });
  expect(team.used).toBe(ledger.billedTokens);
  expect(org).toMatchObject({ tenant: 'acme', budget: 'day-tokens', limit: 500_000 });
  // The org's window counts both teams; the key sees the total, not the other team's part.
  expect(org.used).toBe(ledger.billedTokens + (await s.usage('support-bot')).billedTokens);

  for (const other of ['support-bot', 'acme', 'finance-ops', 'nobody']) {
    const r = await budgets(s, bearer(KEYS.batch), `?tenant=${other}`);
    expect(r.statusCode).toBe(404);
    expect(r.json().error).toMatchObject({ code: 'not_found', param: 'tenant' });
  }
  expect((await budgets(s, bearer(KEYS.batch), '?tenant=batch-summariser')).statusCode).toBe(200);
  // A session cookie with a key is the same viewer.
  const viaCookie = await budgets(s, { cookie: sessionCookieOf(await signIn(s, KEYS.batch)) });
  expect(viaCookie.json().tenants).toEqual(body.tenants);
});

test('/v1/budgets: the admin token sees every tenant; no or wrong credentials get 401', async ({
  stack,
}) => {
  const s = await stack(withAdmin({ patch: withOrg }));
  const all = await budgets(s, bearer(ADMIN_TOKEN));
  expect(all.statusCode).toBe(200);
  expect(all.json().scope).toBe('admin');
  expect(ids(all.json().tenants, 'tenant')).toEqual([
    'batch-summariser',
    'support-bot',
    'finance-ops',
    'multi',
    'acme',
  ]);
  const one = await budgets(s, bearer(ADMIN_TOKEN), '?tenant=finance-ops');
  expect(one.json().tenants).toHaveLength(1);
  expect((await budgets(s, bearer(ADMIN_TOKEN), '?tenant=Bad.Id')).statusCode).toBe(400);

  for (const headers of [{}, bearer('sk-hf-nope'), { authorization: 'Basic abc' }]) {
    const r = await budgets(s, headers);
    expect(r.statusCode).toBe(401);
    expect(r.json().error.code).toBe('invalid_api_key');
  }
});

test('/v1/budgets on an open status page: anyone sees all, a key still only its own', async ({
  stack,
}) => {
  const s = await stack({ edge: { options: { statusAccess: 'open' } } });
  const anyone = await budgets(s, {});
  expect(anyone.statusCode).toBe(200);
  expect(anyone.json().scope).toBe('public');
  expect(anyone.json().tenants).toHaveLength(4);
  const key = await budgets(s, bearer(KEYS.support));
  expect(ids(key.json().tenants, 'tenant')).toEqual(['support-bot']);
  // Credentials that are wrong are refused, even here.
  expect((await budgets(s, bearer('sk-hf-typo'))).statusCode).toBe(401);
});

test("an open status page shows no end user: their ids are the teams' customers (emails, user ids), and no one can look one up without a credential", async ({
  stack,
}) => {
  const s = await stack({ patch: apps, edge: { options: { statusAccess: 'open' } } });
  const user = 'alice@example.com';
  const sent = await s.edge.app.inject({
    method: 'POST',
    url: '/v1/chat/completions',
    headers: bearer(APP_B),
    payload: chat(10, { max_tokens: 10, user }),
  });
  expect(sent.statusCode).toBe(200);
  await s.settled('apps');
  const anyone = await budgets(s, {});
  expect(anyone.statusCode).toBe(200);
  expect(anyone.body).not.toContain(user);
  const team = (anyone.json().tenants as { tenant: string }[]).find((t) => t.tenant === 'apps');
  expect(team).toMatchObject({ endUsers: [], endUserCount: 1 });
  // Before, anyone could ask whether a given address was a team's end user, and its spend.
  const lookup = await budgets(s, {}, `?tenant=apps&end_user=${encodeURIComponent(user)}`);
  expect(lookup.statusCode).toBe(401);
  expect(lookup.body).not.toContain(user);
  // The team's key, and the admin, still see them.
  const mine = await budgets(s, bearer(APP_B), `?tenant=apps&end_user=${encodeURIComponent(user)}`);
  expect(mine.statusCode).toBe(200);
  expect(mine.body).toContain(user);
  expect((await budgets(s, bearer(APP_B))).body).toContain(user);
});

test('/v1/budgets with trustHeaders: x-team is the viewer', async ({ stack }) => {
  const s = await stack({ patch: (c) => (c.auth.trustHeaders = true) });
  const team = await budgets(s, { 'x-team': 'finance-ops' });
  expect(ids(team.json().tenants, 'tenant')).toEqual(['finance-ops']);
  const unknown = await budgets(s, { 'x-team': 'ghost' });
  expect(unknown.statusCode).toBe(403);
  expect(unknown.json().error.code).toBe('unknown_tenant');
});
