import { expect } from 'vitest';
import { ADMIN_TOKEN, withAdmin } from './admin.js';
import { edgeTest as test, KEYS, type Stack } from './harness.js';
import { sessionCookieOf, signIn, signInForm } from './session.js';

const get = (s: Stack, url: string, headers: Record<string, string> = {}) =>
  s.edge.app.inject({ method: 'GET', url, headers });
const form = signInForm;

test('the status page over HTTP: sign-in form, session cookie, CSP with a nonce, the bars fragment', async ({
  stack,
}) => {
  const s = await stack(withAdmin());

  const anonymous = await get(s, '/budgets');
  expect(anonymous.statusCode).toBe(401);
  expect(anonymous.headers['content-type']).toBe('text/html; charset=utf-8');
  expect(anonymous.body).toContain('<form method="post" action="/budgets/session">');
  expect(anonymous.body).not.toContain('batch-summariser');

  const wrong = await signIn(s, 'sk-hf-not-a-key');
  expect(wrong.statusCode).toBe(401);
  expect(wrong.body).toContain('Incorrect API key or admin token');
  expect(String(wrong.headers['set-cookie'])).not.toContain('holdfast_session');

  const ok = await signIn(s, ADMIN_TOKEN);
  expect(ok.statusCode).toBe(303);
  expect(ok.headers.location).toBe('/budgets');
  const setCookie = String(ok.headers['set-cookie']);
  expect(setCookie).toMatch(/^holdfast_session=v1\..+; Path=\/; HttpOnly; SameSite=Strict/);
  // The cookie is a signed statement, not the token.
  expect(setCookie).not.toContain(ADMIN_TOKEN);
  expect(setCookie).not.toContain('Secure');
  const cookie = setCookie.split(';')[0]!;

  const page = await get(s, '/budgets', { cookie });
  expect(page.statusCode).toBe(200);
  const csp = String(page.headers['content-security-policy']);
  const nonce = /'nonce-([^']+)'/.exec(csp)?.[1];
  expect(csp).toContain("default-src 'none'");
  expect(page.body).toContain(`<script nonce="${nonce}">`);
  expect(page.headers['cache-control']).toBe('no-store');
  // First paint is complete: every tenant's bar is in the HTML, no script needed.
  for (const t of ['batch-summariser', 'support-bot', 'finance-ops', 'multi']) {
    expect(page.body).toContain(`data-tenant="${t}" data-budget="month-tokens"`);
  }
  expect(page.body).toContain('Sign out');
  expect(page.body).not.toContain(ADMIN_TOKEN);

  const bars = await get(s, '/budgets/bars', { cookie });
  expect(bars.statusCode).toBe(200);
  expect(bars.body.startsWith('<section')).toBe(true);
  expect(Date.parse(String(bars.headers['x-holdfast-ledger-time']))).not.toBeNaN();
  expect((await get(s, '/budgets/bars')).statusCode).toBe(401);

  const out = await s.edge.app.inject({ method: 'POST', url: '/budgets/session/end' });
  expect(out.statusCode).toBe(303);
  expect(String(out.headers['set-cookie'])).toContain('Max-Age=0');
});

test('a session whose key was deleted ends with the sign-in form and a cleared cookie', async ({
  stack,
}) => {
  const s = await stack(withAdmin());
  const cookie = sessionCookieOf(await signIn(s, KEYS.finance));
  expect(cookie).not.toContain(KEYS.finance);
  const mine = await get(s, '/budgets', { cookie });
  expect(mine.body).toContain('data-tenant="finance-ops"');
  expect(mine.body).not.toContain('support-bot');
  await s.edge.app.inject({
    method: 'DELETE',
    url: '/admin/tenants/finance-ops/keys/finance-1',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  const ended = await get(s, '/budgets', { cookie });
  expect(ended.statusCode).toBe(401);
  expect(ended.body).toContain('no longer valid');
  expect(String(ended.headers['set-cookie'])).toContain('Max-Age=0');
});

test('an open status page needs no sign-in', async ({ stack }) => {
  const s = await stack({ edge: { options: { statusAccess: 'open' } } });
  const page = await get(s, '/budgets');
  expect(page.statusCode).toBe(200);
  expect(page.body).toContain('data-tenant="support-bot"');
  expect(page.body).not.toContain('Sign out');
});

test("login CSRF: a sign-in without the form's token, or from another site, opens no session", async ({
  stack,
}) => {
  const s = await stack(withAdmin());
  const f = await form(s);
  const refused = [
    await signIn(s, ADMIN_TOKEN, { csrf: 'forged' }),
    await signIn(s, ADMIN_TOKEN, { cookie: 'holdfast_csrf=other' }),
    await signIn(s, ADMIN_TOKEN, {
      csrf: f.csrf,
      cookie: f.cookie,
      headers: { origin: 'https://evil.example' },
    }),
    await signIn(s, ADMIN_TOKEN, { headers: { 'sec-fetch-site': 'cross-site' } }),
  ];
  for (const r of refused) {
    expect(r.statusCode).toBe(403);
    expect(String(r.headers['set-cookie'])).not.toContain('holdfast_session');
  }
});

test('sign-in is rate limited per client: a guesser gets 429 with Retry-After, the rest go on', async ({
  stack,
}) => {
  const s = await stack(withAdmin({ edge: { options: { signInPerMinute: 3 } } }));
  const guesser = { remoteAddress: '10.0.0.7' };
  const codes: number[] = [];
  for (let i = 0; i < 5; i++) codes.push((await signIn(s, `sk-hf-guess-${i}`, guesser)).statusCode);
  expect(codes).toEqual([401, 401, 401, 429, 429]);
  // Even the right token waits: guessing faster cannot find it.
  const limited = await signIn(s, ADMIN_TOKEN, guesser);
  expect(limited.statusCode).toBe(429);
  expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
  // Another client is not held back by the guesser.
  expect((await signIn(s, ADMIN_TOKEN, { remoteAddress: '10.0.0.8' })).statusCode).toBe(303);
});

test('behind a proxy that says https, the session cookie is Secure', async ({ stack }) => {
  const s = await stack(withAdmin({ edge: { options: { trustProxy: true } } }));
  const ok = await signIn(s, ADMIN_TOKEN, { headers: { 'x-forwarded-proto': 'https' } });
  expect(ok.statusCode).toBe(303);
  expect(String(ok.headers['set-cookie'])).toContain('Secure');
});
