import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { apps, APP_A, APP_B } from './apps.js';
import { chat, edgeTest as test, entry, KEYS, type Stack, type TestConfig } from './harness.js';
import { CLAUDE, post, words } from './surfaces.js';

/**
 * Red team, identities: who an end user is (every body field a client may name one in), what
 * a client rotating or varying its end user gets, and ids a client sends that the edge must
 * not trust (request and reservation ids, duplicated credentials).
 */

const APP = APP_B;

/** Team apps (end-user budgets) tracking at most 2 end users. */
function capped(c: TestConfig): void {
  apps(c);
  entry(c.tenants, 'apps').maxEndUsers = 2;
}

const auth = { authorization: `Bearer ${APP}` };

async function endUsers(s: Stack): Promise<(string | undefined)[]> {
  const events = await s.events((e) => e.some((x) => x.type === 'reservation.settled'));
  return events.filter((e) => e.type === 'reservation.created').map((e) => e.endUser);
}

test('chat: safety_identifier names the end user, as on Responses; user wins when both are sent', async ({
  stack,
}) => {
  const s = await stack({ patch: capped });
  const one = await post(
    s,
    '/v1/chat/completions',
    chat(10, { max_tokens: 20, safety_identifier: 'alice' }),
    auth,
  );
  expect(one.status).toBe(200);
  expect(one.headers.get('x-holdfast-remaining-user-day-tokens')).not.toBeNull();
  const both = await post(
    s,
    '/v1/chat/completions',
    chat(10, { max_tokens: 20, user: 'bob', safety_identifier: 'alice' }),
    auth,
  );
  expect(both.status).toBe(200);
  const responses = await post(
    s,
    '/v1/responses',
    {
      model: 'gpt-4o-mini',
      input: 'hi',
      max_output_tokens: 20,
      user: 'bob',
      safety_identifier: 'x',
    },
    auth,
  );
  expect(responses.status).toBe(200);
  await s.events((e) => e.filter((x) => x.type === 'reservation.settled').length === 3);
  expect(await endUsers(s)).toEqual(['alice', 'bob', 'bob']);
  const u = await s.settled('apps');
  expect(u.billedTokens).toBe(
    s.upstream.stats().billed.promptTokens + s.upstream.stats().billed.completionTokens,
  );
});

test('maxEndUsers exhausted: a new end user (or a variant of a known one) gets 429 end_user_limit on every surface, holds nothing, reaches no model; known ones and calls naming none go on', async ({
  stack,
}) => {
  const s = await stack({ patch: capped });
  const ask = (user: string | undefined) =>
    post(s, '/v1/chat/completions', chat(10, { max_tokens: 20, ...(user ? { user } : {}) }), auth);
  expect((await ask('u1')).status).toBe(200);
  expect((await ask('u2')).status).toBe(200);
  const served = s.upstream.stats().recent.length;
  // A new id, and variants of a known one (ids are kept exactly as sent, or hashed).
  for (const user of ['u3', 'U1', 'u1 ', ' u1', 'u1\u0000', 'u\u0031\u0301', 'x'.repeat(512)]) {
    const r = await ask(user);
    expect(r.status, JSON.stringify(user)).toBe(429);
    expect(r.body.error).toMatchObject({ code: 'end_user_limit', type: 'insufficient_quota' });
  }
  const messages = await post(
    s,
    '/v1/messages',
    {
      model: CLAUDE,
      max_tokens: 20,
      metadata: { user_id: 'u4' },
      messages: [{ role: 'user', content: words(10) }],
    },
    { 'x-api-key': APP },
  );
  expect(messages.status).toBe(429);
  expect(messages.body).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
  expect(messages.headers.get('x-holdfast-error-code')).toBe('end_user_limit');
  expect(s.upstream.stats().recent).toHaveLength(served);
  expect((await ask('u1')).status).toBe(200);
  expect((await ask(undefined)).status).toBe(200);
  const u = await s.settled('apps');
  expect(u.endUserCount).toBe(2);
  expect(u.endUsers.map((e) => e.id).sort()).toEqual(['u1', 'u2']);
  const b = s.upstream.stats().billed;
  expect(u.billedTokens).toBe(b.promptTokens + b.completionTokens);
});

/** A raw request with headers as a list (so a header can be sent twice). */
function rawPost(
  s: Stack,
  headers: string[],
  body: unknown,
): Promise<{ status: number; text: string }> {
  const url = new URL(`${s.edge.url}/v1/chat/completions`);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        // A list of headers gets no Host of its own (Node refuses a request without one).
        headers: ['host', url.host, 'content-type', 'application/json', ...headers],
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

test("ids a client sends are not trusted: another call's reservation id or a request id changes nothing; a credential sent twice is refused", async ({
  stack,
}) => {
  const s = await stack({ behaviour: { tokenDelayMs: 10 } });
  // support-bot's call holds its reservation while another tenant names it.
  const victim = s
    .openai(KEYS.support)
    .chat.completions.create({ ...chat(10), max_tokens: 100 })
    .withResponse();
  await waitFor(async () => (await s.usage('support-bot')).inFlight === 1, {
    what: 'the victim in flight',
  });
  const created = await s.events((e) => e.some((x) => x.type === 'reservation.created'));
  const id = created.find((e) => e.type === 'reservation.created')!.reservationId;
  const injected = {
    'x-holdfast-reservation-id': id,
    'x-request-id': id,
    'x-client-request-id': id,
    'idempotency-key': id,
  };
  const other = await post(s, '/v1/chat/completions', chat(10, { max_tokens: 20 }), {
    authorization: `Bearer ${KEYS.batch}`,
    ...injected,
  });
  expect(other.status).toBe(200);
  expect(other.headers.get('x-holdfast-reservation-id')).not.toBe(id);
  expect(other.headers.get('x-request-id')).not.toBe(id);
  const { response } = await victim;
  expect(response.headers.get('x-holdfast-reservation-id')).toBe(id);
  // Each call settled once, to its own tenant, as the provider billed it.
  const events = await s.events(
    (e) => e.filter((x) => x.type === 'reservation.settled').length === 2,
  );
  const settled = events.filter((e) => e.type === 'reservation.settled');
  expect(settled.map((e) => [e.tenant, e.reservationId === id]).sort()).toEqual([
    ['batch-summariser', false],
    ['support-bot', true],
  ]);
  const [a, b] = [await s.settled('support-bot'), await s.settled('batch-summariser')];
  const bill = s.upstream.stats().billed;
  expect(a.billedTokens + b.billedTokens).toBe(bill.promptTokens + bill.completionTokens);
  expect(s.upstream.stats().recent).toHaveLength(2);
  // A key sent twice (two x-api-key headers, or a second Authorization) does not pick either.
  const body = chat(5, { max_tokens: 5 });
  const twice = await rawPost(s, ['x-api-key', KEYS.batch, 'x-api-key', KEYS.support], body);
  expect(twice.status).toBe(400);
  const useCases = await rawPost(
    s,
    ['x-use-case', 'UC-112', 'x-use-case', 'UC-101', 'authorization', `Bearer ${KEYS.batch}`],
    body,
  );
  expect(useCases.status).toBe(400);
  expect(s.upstream.stats().recent).toHaveLength(2);
});

test('a header the edge reads, sent twice, is a 400 naming it: neither the first (Node keeps only the first Authorization) nor both joined (x-holdfast-user "alice, bob" was a third end user)', async ({
  stack,
}) => {
  const s = await stack({ patch: apps });
  const body = chat(5, { max_tokens: 5 });
  const key = ['authorization', `Bearer ${APP_A}`];
  const cases: [string, string[]][] = [
    ['authorization', ['authorization', `Bearer ${APP_A}`, 'Authorization', `Bearer ${APP_B}`]],
    ['authorization', [...key, 'authorization', `Bearer ${APP_A}`]],
    ['x-api-key', ['x-api-key', APP_A, 'x-api-key', APP_A]],
    ['x-use-case', [...key, 'x-use-case', 'uc', 'x-use-case', 'uc']],
    ['x-holdfast-user', [...key, 'x-holdfast-user', 'alice', 'x-holdfast-user', 'bob']],
    ['x-holdfast-user', [...key, 'X-Holdfast-User', 'alice', 'x-holdfast-user', 'alice']],
    ['x-team', [...key, 'x-team', 'apps', 'x-team', 'apps']],
  ];
  for (const [name, headers] of cases) {
    const r = await rawPost(s, headers, body);
    expect({ name, status: r.status }).toEqual({ name, status: 400 });
    expect(JSON.parse(r.text)).toMatchObject({
      error: { code: 'invalid_request', param: name, message: `Send the ${name} header once.` },
    });
  }
  // Nothing reached a model, nothing was held or billed, no end user was kept.
  expect(s.upstream.stats().recent).toHaveLength(0);
  expect((await s.settled('apps')).billedTokens).toBe(0);
  const once = await rawPost(s, [...key, 'x-use-case', 'uc', 'x-holdfast-user', 'alice'], body);
  expect(once.status).toBe(200);
  const u = await s.settled('apps');
  expect(u.endUsers.map((e) => e.id)).toEqual(['alice']);
});

test("an end user sent as another's hashed id is another end user: it never spends that one's window", async ({
  stack,
}) => {
  const s = await stack({ patch: apps });
  const ask = (user: string) =>
    post(s, '/v1/chat/completions', chat(10, { max_tokens: 20, user }), auth);
  // 'josé' is not plain ASCII: Holdfast keys it by `sha256:` and 32 hex digits of its SHA-256.
  const hashed = `sha256:${createHash('sha256').update('josé').digest('hex').slice(0, 32)}`;
  expect((await ask('josé')).status).toBe(200);
  expect((await ask(hashed)).status).toBe(200);
  const u = await s.settled('apps');
  // Before, the second was kept as sent: the same id as the first, billed to its windows.
  expect(u.endUserCount).toBe(2);
  expect(u.endUsers.map((e) => e.id)).toContain(hashed);
  // Looked up as sent ('josé'), or by the id listed for it: both are josé.
  const lookup = async (user: string) => {
    const r = await fetch(`${s.edge.url}/v1/budgets?end_user=${encodeURIComponent(user)}`, {
      headers: auth,
    });
    const view = (await r.json()) as { tenants: { endUsers: { id: string }[] }[] };
    return view.tenants[0]!.endUsers.map((e) => e.id);
  };
  expect(await lookup('josé')).toEqual([hashed]);
  expect(await lookup(hashed)).toEqual([hashed]);
});

test('end users whose ids differ only in a lone surrogate, or in the U+FFFD UTF-8 writes for one, are different end users', async ({
  stack,
}) => {
  const s = await stack({ patch: apps });
  // UTF-8 cannot hold a lone surrogate: each was hashed as U+FFFD, so these three were one end
  // user, each spending the others' windows.
  const ids = ['bob\ud800', 'bob\udbff', 'bob\ufffd'];
  for (const user of ids) {
    const res = await post(s, '/v1/chat/completions', chat(10, { max_tokens: 20, user }), auth);
    expect(res.status).toBe(200);
  }
  const u = await s.settled('apps');
  expect(u.endUserCount).toBe(3);
  // A well-formed id keeps its hash (SHA-256 of its UTF-8).
  const plain = `sha256:${createHash('sha256').update('bob\ufffd').digest('hex').slice(0, 32)}`;
  expect(u.endUsers.map((e) => e.id)).toContain(plain);
});

test('an end user named in x-holdfast-user in UTF-8 is the one the body names, and is found by the lookup', async ({
  stack,
}) => {
  const s = await stack({ patch: apps });
  // Node reads header bytes as Latin-1: 'josé' in UTF-8 came out 'josÃ©', another end user than
  // the body's 'josé', with windows of its own, that no lookup of 'josé' found.
  const viaHeader = await new Promise<number>((resolve, reject) => {
    const url = new URL(`${s.edge.url}/v1/chat/completions`);
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        headers: {
          authorization: `Bearer ${APP_A}`,
          'content-type': 'application/json',
          // Node's client writes it in UTF-8 (c3 a9).
          'x-holdfast-user': 'josé',
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(chat(10, { max_tokens: 20 })));
  });
  expect(viaHeader).toBe(200);
  const viaBody = await post(
    s,
    '/v1/chat/completions',
    chat(10, { max_tokens: 20, user: 'josé' }),
    { authorization: `Bearer ${APP_A}` },
  );
  expect(viaBody.status).toBe(200);
  const u = await s.settled('apps');
  const hashed = `sha256:${createHash('sha256').update('josé').digest('hex').slice(0, 32)}`;
  expect(u.endUsers.map((e) => e.id)).toEqual([hashed]);
});
