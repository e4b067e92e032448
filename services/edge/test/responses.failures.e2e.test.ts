import { expect } from 'vitest';
import { apiError, edgeTest as test, entry, KEYS, type Stack } from './harness.js';
import {
  adaptiveBatch,
  billedAsProvider,
  expectAbortBilled,
  expectGrown,
  expectStallBilled,
  expectStripped,
  GENERATING,
  post,
  STALLS,
  words,
} from './surfaces.js';

/**
 * The Responses surface has chat's guarantees: nothing reaches the model before admission,
 * refusals in OpenAI's shape, streamed output billed when the client leaves, retries, a cut
 * at the admitted output, vendor fields stripped, holds that grow.
 */
const ask = (extra: Record<string, unknown> = {}) => ({
  model: 'gpt-4o-mini',
  input: words(20),
  ...extra,
});
const streamed = (extra: Record<string, unknown> = {}) => ({
  ...ask(extra),
  stream: true as const,
});

test('unknown key 401 and unregistered use case 403, in OpenAI shape; the model is never called', async ({
  stack,
}) => {
  const s = await stack();
  const key = await apiError(s.openai('sk-nope').responses.create(ask()));
  expect(key.status).toBe(401);
  expect(key.code).toBe('invalid_api_key');
  const uc = await apiError(
    s.openai(KEYS.support).responses.create(ask(), { headers: { 'x-use-case': 'UC-999' } }),
  );
  expect(uc.status).toBe(403);
  expect(uc.code).toBe('use_case_not_registered');
  expect(uc.headers?.get('x-holdfast-error-code')).toBe('use_case_not_registered');
  expect(s.upstream.stats().requests.responses).toBe(0);
  expect(s.upstream.stats().recent).toEqual([]);
});

test('budget refusal: 429 budget_exceeded with Retry-After, nothing reaches the model', async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) =>
      (entry(c.tenants, 'batch-summariser').budgets = [{ window: 'month', limit: 1_100 }]),
  });
  await s.openai(KEYS.batch).responses.create(ask());
  await s.settled('batch-summariser');
  const r = await post(s, '/v1/responses', ask(), { authorization: `Bearer ${KEYS.batch}` });
  expect(r.status).toBe(429);
  expect(r.body.error).toMatchObject({ code: 'budget_exceeded', type: 'insufficient_quota' });
  expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(s.upstream.stats().requests.responses).toBe(1);
});

test('client disconnect mid-stream: the upstream sees the abort, the streamed output is billed, nothing held', async ({
  stack,
}) => {
  const s = await stack({ behaviour: GENERATING });
  await expectAbortBilled(s, 'responses', await leaveAfter(s, 10));
});

test('client disconnect while the model stalls: every token streamed before it is billed, to the token', async ({
  stack,
}) => {
  const s = await stack({ behaviour: STALLS.behaviour });
  await expectStallBilled(s, 'responses', (n) => leaveAfter(s, n));
});

/** Streams a reply and leaves after `deltas` text deltas; how many the client received. */
async function leaveAfter(s: Stack, deltas: number): Promise<number> {
  const aborter = new AbortController();
  const stream = await s
    .openai(KEYS.support)
    .responses.create(streamed(), { signal: aborter.signal });
  let received = 0;
  for await (const event of stream) {
    if (event.type === 'response.output_text.delta' && ++received === deltas) aborter.abort();
  }
  expect(received).toBe(deltas);
  return received;
}

test('upstream 500 twice, then 429: retried with backoff, the call served and billed once', async ({
  stack,
}) => {
  const s = await stack();
  s.upstream.failNext({ status: 500, count: 2 });
  const r = await s.openai(KEYS.support).responses.create(ask());
  expect(r.status).toBe('completed');
  s.upstream.failNext({ status: 429, count: 1, retryAfter: 0.01 });
  await s
    .openai(KEYS.support)
    .responses.create(streamed())
    .then(async (st) => {
      for await (const _ of st);
    });
  expect(s.upstream.stats().errorsInjected).toMatchObject({ '500': 2, '429': 1 });
  expect(s.upstream.stats().requests.responses).toBe(5);
  await billedAsProvider(s, 'support-bot');
});

test('an upstream that ignores max_output_tokens is cut at the admitted output: response.incomplete, max_output_tokens', async ({
  stack,
}) => {
  const s = await stack({ behaviour: { ignoreMaxTokens: 300 } });
  const openai = s.openai(KEYS.support);
  const stream = await openai.responses.create(streamed({ max_output_tokens: 50 }));
  let text = '';
  let last:
    { type: string; response?: { status?: string; incomplete_details?: unknown } } | undefined;
  for await (const event of stream) {
    if (event.type === 'response.output_text.delta') text += event.delta;
    last = event;
  }
  expect(text.split(' ').length).toBeLessThanOrEqual(51);
  expect(last).toMatchObject({
    type: 'response.incomplete',
    response: { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } },
  });
  const { data, response } = await openai.responses
    .create(ask({ max_output_tokens: 50 }))
    .withResponse();
  expect(data.status).toBe('incomplete');
  expect(data.incomplete_details).toEqual({ reason: 'max_output_tokens' });
  expect(response.headers.get('x-holdfast-ended')).toBe('output_limit');
  expect(data.output_text.split(' ').length).toBeLessThanOrEqual(51);
  const usage = await s.settled('support-bot');
  // Billed what was let through (the edge's count), never past the holds.
  const prompt = Number(response.headers.get('x-holdfast-prompt-tokens'));
  expect(usage.billedTokens).toBeLessThanOrEqual(2 * (prompt + 51));
});

test('vendor length fields never reach the model; the client is told what was dropped', async ({
  stack,
}) => {
  const s = await stack();
  const r = await post(
    s,
    '/v1/responses',
    ask({
      max_output_tokens: 20,
      n_predict: 5_000,
      max_new_tokens: 5_000,
      options: { num_predict: 5_000 },
      max_tokens: 9_000,
    }),
    { authorization: `Bearer ${KEYS.support}` },
  );
  await expectStripped(s, r, 'n_predict, max_new_tokens, options, max_tokens');
});

test('adaptive mode: the hold starts at the estimate and grows as the output streams', async ({
  stack,
}) => {
  const s = await stack({ patch: adaptiveBatch });

  s.upstream.configure({ completion: { mode: 'fixed', tokens: 50 } });
  for (let i = 0; i < 3; i++)
    await s.openai(KEYS.batch).responses.create(ask({ max_output_tokens: 1_024 }));
  await s.settled('batch-summariser');
  s.upstream.configure({ completion: { mode: 'fixed', tokens: 600 } });
  const stream = await s
    .openai(KEYS.batch)
    .responses.create(streamed({ max_output_tokens: 1_024 }));
  let status: string | undefined;
  for await (const event of stream)
    if (event.type === 'response.completed') status = event.response.status;
  expect(status).toBe('completed');
  await billedAsProvider(s, 'batch-summariser');
  await expectGrown(s, 'responses');
});
