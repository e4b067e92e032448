import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { startEdge } from '../src/index.js';
import { apiError, chat, edgeTest as test, entry, KEYS, type Stack } from './harness.js';

/** A raw request to the edge; the body is sent as is when it is a string. */
async function send(s: Stack, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${s.edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as ErrorBody };
}
interface ErrorBody {
  error: { message: string; type: string; code: string; param: string | null };
}
const auth = (key: string) => ({ authorization: `Bearer ${key}` });

function expectShape(body: ErrorBody, code: string): void {
  expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
  expect(body.error.code).toBe(code);
  expect(body.error.message.length).toBeGreaterThan(10);
}

test('401 invalid_api_key: no key, an unknown key, a malformed header; the model is never called', async ({
  stack,
}) => {
  const s = await stack();
  for (const headers of [{}, auth('sk-nope'), { authorization: 'Basic abc' }, auth('')]) {
    const r = await send(s, chat(), headers);
    expect(r.status).toBe(401);
    expectShape(r.body, 'invalid_api_key');
  }
  const err = await apiError(s.openai('sk-unknown').chat.completions.create(chat()));
  expect(err.status).toBe(401);
  expect(err.code).toBe('invalid_api_key');
  expect(s.upstream.stats().requests.chatCompletions).toBe(0);
});

test('403 unknown_tenant in trustHeaders mode; a known x-team needs no key', async ({ stack }) => {
  const s = await stack({ patch: (c) => (c.auth.trustHeaders = true) });
  for (const team of ['nobody', 'Support-Bot', 'support-bot.x']) {
    const r = await send(s, chat(), { 'x-team': team });
    expect(r.status).toBe(403);
    expectShape(r.body, 'unknown_tenant');
  }
  expect((await send(s, chat(), {})).body.error.code).toBe('unknown_tenant');
  const ok = await fetch(`${s.edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-team': 'support-bot' },
    body: JSON.stringify(chat()),
  });
  expect(ok.status).toBe(200);
  expect((await s.settled('support-bot')).billedTokens).toBe(27 + 50);
  const events = await s.events((e) => e.some((x) => x.type === 'reservation.settled'));
  expect(events.find((e) => e.type === 'reservation.settled')).toMatchObject({ keyId: null });
});

test('403 use_case_not_registered: recorded by the authority, the model is never called', async ({
  stack,
}) => {
  const s = await stack();
  const err = await apiError(
    s.openai(KEYS.support).chat.completions.create(chat(), { headers: { 'x-use-case': 'UC-999' } }),
  );
  expect(err.status).toBe(403);
  expect(err.code).toBe('use_case_not_registered');
  expect(err.message).toContain('UC-999');
  // Not even well-formed: refused at the edge.
  const bad = await send(s, chat(), { ...auth(KEYS.support), 'x-use-case': 'UC 1\tX-Evil: 1' });
  expect(bad.status).toBe(403);
  expectShape(bad.body, 'use_case_not_registered');
  // A team with several use cases and a key without a default must say which.
  const multi = await send(s, chat(), auth(KEYS.multi));
  expect(multi.status).toBe(200);
  expect(s.upstream.stats().requests.chatCompletions).toBe(1);
  const events = await s.events((e) => e.some((x) => x.type === 'admission.refused'));
  expect(events.find((e) => e.type === 'admission.refused')).toMatchObject({
    code: 'use_case_not_registered',
    useCase: 'UC-999',
  });
  const usage = await s.usage('support-bot');
  expect(usage.billedTokens).toBe(0);
});

test('403 model_not_allowed: a model outside the use case, or one that cannot exist', async ({
  stack,
}) => {
  const s = await stack();
  const err = await apiError(
    s.openai(KEYS.support).chat.completions.create({ ...chat(), model: 'gpt-4o' }),
  );
  expect(err.status).toBe(403);
  expect(err.code).toBe('model_not_allowed');
  const weird = await send(s, { ...chat(), model: 'gpt 4o; drop' }, auth(KEYS.support));
  expect(weird.status).toBe(403);
  expectShape(weird.body, 'model_not_allowed');
  expect(weird.body.error.param).toBe('model');
  expect(s.upstream.stats().requests.chatCompletions).toBe(0);
});

test('403 tenant_suspended', async ({ stack }) => {
  const s = await stack();
  await s.client.suspend({ tenant: 'support-bot', reason: 'test', by: 'admin' });
  const err = await apiError(s.openai(KEYS.support).chat.completions.create(chat()));
  expect(err.status).toBe(403);
  expect(err.code).toBe('tenant_suspended');
  expect(s.upstream.stats().requests.chatCompletions).toBe(0);
});

test('429 budget_exceeded with Retry-After and a message in numbers; nothing reaches the model', async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) =>
      (entry(c.tenants, 'batch-summariser').budgets = [{ window: 'month', limit: 1_100 }]),
  });
  await s.openai(KEYS.batch).chat.completions.create(chat());
  await s.settled('batch-summariser');
  const r = await send(s, chat(), auth(KEYS.batch));
  expect(r.status).toBe(429);
  expectShape(r.body, 'budget_exceeded');
  expect(r.body.error.type).toBe('insufficient_quota');
  expect(r.body.error.message).toBe(
    'This call could use up to 1,051 tokens (27 prompt + 1,024 max_tokens) and team batch-summariser has 1,023 tokens left in its month window. Lower max_tokens or raise the budget.',
  );
  // The billed usage leaves the sliding month window in about 30 days.
  const retryAfter = Number(r.headers.get('retry-after'));
  expect(retryAfter).toBeGreaterThan(29 * 86_400);
  expect(r.headers.get('x-should-retry')).toBe('false');
  expect(r.headers.get('ratelimit')).toBe('"month-tokens";r=1023');
  expect(s.upstream.stats().requests.chatCompletions).toBe(1);
  // The official client surfaces it as a RateLimitError with the code.
  const err = await apiError(s.openai(KEYS.batch).chat.completions.create(chat()));
  expect(err.status).toBe(429);
  expect(err.code).toBe('budget_exceeded');
});

test('429 concurrency_limit with Retry-After while the tenant is at its cap', async ({ stack }) => {
  const s = await stack({
    patch: (c) => (entry(c.tenants, 'batch-summariser').maxInFlight = 1),
    behaviour: { firstTokenLatencyMs: 60_000 },
  });
  const aborter = new AbortController();
  const first = s
    .openai(KEYS.batch)
    .chat.completions.create(chat(), { signal: aborter.signal })
    .catch(() => 'aborted');
  await waitFor(async () => (await s.usage('batch-summariser')).inFlight === 1);
  const r = await send(s, chat(), auth(KEYS.batch));
  expect(r.status).toBe(429);
  expectShape(r.body, 'concurrency_limit');
  expect(r.headers.get('retry-after')).toBe('1');
  expect(r.body.error.message).toContain('1 calls in flight');
  aborter.abort();
  expect(await first).toBe('aborted');
  await s.settled('batch-summariser');
});

test('429 upstream_rate_limited after the edge retried, never confused with the budget', async ({
  stack,
}) => {
  const s = await stack();
  s.upstream.failNext({ status: 429, count: 3, retryAfter: 0 });
  const r = await send(s, chat(), auth(KEYS.support));
  expect(r.status).toBe(429);
  expectShape(r.body, 'upstream_rate_limited');
  expect(r.body.error.type).toBe('rate_limit_error');
  expect(r.body.error.message).toMatch(
    /^The model upstream \(default\) answered 429 \(rate limited\) to all 3 attempts; the edge waited \d+ m?s between them in all, and the last answer asked to wait 0 ms\. This is the provider's rate limit, not your Holdfast budget: retry in 0 ms\.$/,
  );
  expect(s.upstream.stats().errorsInjected['429']).toBe(3);
  const usage = await s.settled('support-bot');
  expect(usage.billedTokens).toBe(0);
});

test('429 upstream_rate_limited with a Retry-After longer than the edge waits: answered at once, and the message says it did not retry', async ({
  stack,
}) => {
  const s = await stack();
  s.upstream.failNext({ status: 429, count: 1, retryAfter: 30 });
  // The test edge waits at most 2 s for a Retry-After (EDGE_RETRY_AFTER_CAP_MS, 10 s by default).
  const started = Date.now();
  const r = await send(s, chat(), auth(KEYS.support));
  expect(Date.now() - started).toBeLessThan(5_000);
  expect(r.status).toBe(429);
  expect(r.headers.get('retry-after')).toBe('30');
  expect(r.body.error.message).toBe(
    "The model upstream (default) answered 429 (rate limited) and asked to wait 30 s; the edge waits at most 2 s for a retry, so it did not retry. This is the provider's rate limit, not your Holdfast budget: retry in 30 s.",
  );
  expect(s.upstream.stats().errorsInjected['429']).toBe(1);
  await s.settled('support-bot');
});

test('503 budget_authority_unavailable when the authority does not answer; failOpen serves unmetered', async ({
  stack,
}) => {
  const s = await stack();
  await s.stopAuthority();
  const r = await send(s, chat(), auth(KEYS.support));
  expect(r.status).toBe(503);
  expectShape(r.body, 'budget_authority_unavailable');
  expect(s.upstream.stats().requests.chatCompletions).toBe(0);

  const open = await fetch(`${s.edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...auth(KEYS.finance) },
    body: JSON.stringify(chat()),
  });
  expect(open.status).toBe(200);
  expect(open.headers.get('x-holdfast-unmetered')).toBe('authority_unavailable');
});

test('failOpen serves only what the config registers: with the authority down, a use case or a model the team does not have is a 403, nothing sent', async ({
  stack,
}) => {
  // A dearer model in the config that finance-ops' use case does not allow.
  const s = await stack({
    patch: (c) => c.models.push({ ...c.models[0]!, id: 'gpt-4o', fallbackUpstreams: [] }),
  });
  await s.stopAuthority();
  // Before, both were served unmetered: failOpen let any model and use case through.
  const useCase = await send(s, chat(), { ...auth(KEYS.finance), 'x-use-case': 'UC-999' });
  expect(useCase.status).toBe(403);
  expectShape(useCase.body, 'use_case_not_registered');
  const model = await send(s, { ...chat(), model: 'gpt-4o' }, auth(KEYS.finance));
  expect(model.status).toBe(403);
  expectShape(model.body, 'model_not_allowed');
  expect(s.upstream.stats().requests.chatCompletions).toBe(0);
  // A registered call is still served unmetered.
  const open = await send(s, chat(), auth(KEYS.finance));
  expect(open.status).toBe(200);
});

test('failOpen does not serve a team this edge saw suspended: with the authority down its calls are a 403 tenant_suspended', async ({
  stack,
}) => {
  // No refusal memory: the 403 below is the suspension's, not a remembered refusal's.
  const s = await stack({ edge: { options: { refusals: { memoryMs: 0, reportMs: 50 } } } });
  await s.client.suspend({ tenant: 'finance-ops', reason: 'admin', by: 'admin' });
  const refused = await send(s, chat(), auth(KEYS.finance));
  expect(refused.status).toBe(403);
  // The edge hears of it from the tenant.suspended event, which the authority's relay
  // publishes after the change: stopping the authority first could leave it unpublished.
  await s.events((e) => e.some((x) => x.type === 'tenant.suspended'));
  await new Promise((done) => setTimeout(done, 200));
  await s.stopAuthority();
  // Before, it was served unmetered as soon as the authority stopped answering.
  const r = await send(s, chat(), auth(KEYS.finance));
  expect(r.status).toBe(403);
  expectShape(r.body, 'tenant_suspended');
  expect(s.upstream.stats().requests.chatCompletions).toBe(0);
});

test('an edge started while a team is suspended knows it (the authority says so at start): failOpen does not serve it while the authority is down', async ({
  stack,
  nc,
  iso,
}) => {
  const s = await stack({ edge: { options: { refusals: { memoryMs: 0, reportMs: 50 } } } });
  await s.client.suspend({ tenant: 'finance-ops', reason: 'admin', by: 'admin' });
  await s.events((e) => e.some((x) => x.type === 'tenant.suspended'));
  // A second edge, started after the event: no event will tell it.
  const late = await startEdge({
    nc,
    names: iso.names,
    options: { refusals: { memoryMs: 0, reportMs: 50 } },
  });
  try {
    await waitFor(async () => (await fetch(`${late.url}/readyz`)).ok || undefined, {
      what: 'the late edge to load its config',
    });
    await new Promise((done) => setTimeout(done, 300));
    await s.stopAuthority();
    const r = await fetch(`${late.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...auth(KEYS.finance) },
      body: JSON.stringify(chat()),
    });
    expect(r.status).toBe(403);
    expect(r.headers.get('x-holdfast-error-code')).toBe('tenant_suspended');
  } finally {
    await late.stop();
  }
});

test('400 invalid_request for malformed bodies and 413 for oversized ones', async ({ stack }) => {
  const s = await stack({ edge: { options: { bodyLimitBytes: 4_096 } } });
  const h = auth(KEYS.support);
  const cases: Array<[unknown, string | null]> = [
    ['{"model": "gpt-4o-mini", "messages": [', null],
    [{ model: 'gpt-4o-mini', messages: 'hello' }, 'messages'],
    [{ messages: [{ role: 'user', content: 'hi' }] }, 'model'],
    [{ ...chat(), max_tokens: -1 }, 'max_tokens'],
    [{ ...chat(), max_tokens: 1.5 }, 'max_tokens'],
    [{ ...chat(), temperature: 7 }, 'temperature'],
    [{ ...chat(), stream: 'yes' }, 'stream'],
    [{ model: 'gpt-4o-mini', messages: [{ role: 'wizard', content: 'hi' }] }, 'messages.0.role'],
    [{ ...chat(), n: 600, max_tokens: 500 }, 'n'],
  ];
  for (const [body, param] of cases) {
    const r = await send(s, body, h);
    expect(r.status).toBe(400);
    expectShape(r.body, 'invalid_request');
    expect(r.body.error.param).toBe(param);
  }
  const big = await send(s, chat(2_000), h);
  expect(big.status).toBe(413);
  expectShape(big.body, 'invalid_request');
  // Unknown fields are fine (passed through upstream).
  const ok = await send(s, { ...chat(), some_new_param: { x: 1 } }, h);
  expect(ok.status).toBe(200);
  expect(s.upstream.stats().requests.chatCompletions).toBe(1);
  expect((await s.settled('support-bot')).billedTokens).toBe(77);
});

test('404 for unknown routes, in the same error shape', async ({ stack }) => {
  const s = await stack();
  const res = await fetch(`${s.edge.url}/v1/completions`, {
    method: 'POST',
    headers: auth(KEYS.support),
  });
  expect(res.status).toBe(404);
  expectShape((await res.json()) as ErrorBody, 'not_found');
});
