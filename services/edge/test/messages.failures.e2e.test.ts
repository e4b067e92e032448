import Anthropic from '@anthropic-ai/sdk';
import { expect } from 'vitest';
import { edgeTest as test, entry, KEYS, type Stack, type TestConfig } from './harness.js';
import {
  adaptiveBatch,
  anthropic,
  billedAsProvider,
  CLAUDE,
  clientError,
  expectAbortBilled,
  expectGrown,
  expectStallBilled,
  expectStripped,
  GENERATING,
  post,
  STALLS,
  withClaude,
  words,
} from './surfaces.js';

/**
 * The Messages surface has chat's guarantees, with errors in Anthropic's shape: nothing
 * reaches the model before admission, streamed output billed when the client leaves (with
 * the cache counts message_start reported), retries, a cut at the admitted output, vendor
 * fields stripped, holds that grow.
 */
const ask = (extra: Record<string, unknown> = {}) => ({
  model: CLAUDE,
  max_tokens: 1_024,
  messages: [{ role: 'user' as const, content: words(20) }],
  ...extra,
});

test("unknown key 401 and unregistered use case 403, in Anthropic's shape with our code; the model is never called", async ({
  stack,
}) => {
  const s = await stack({ patch: withClaude });
  const key = await clientError(anthropic(s, 'sk-nope').messages.create(ask()));
  expect(key.status).toBe(401);
  expect(key.error).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
  expect(key.headers?.get('x-holdfast-error-code')).toBe('invalid_api_key');
  const uc = await clientError(
    anthropic(s, KEYS.support).messages.create(ask(), { headers: { 'x-use-case': 'UC-999' } }),
  );
  expect(uc.status).toBe(403);
  expect(uc.error).toMatchObject({
    error: {
      type: 'permission_error',
      message: expect.stringMatching(/^use_case_not_registered: .*UC-999/),
    },
  });
  expect(s.upstream.stats().requests.messages).toBe(0);
  expect(s.upstream.stats().recent).toEqual([]);
});

test('budget refusal: 429 rate_limit_error with Retry-After and budget_exceeded readable; nothing reaches the model', async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      withClaude(c);
      entry(c.tenants, 'batch-summariser').budgets = [{ window: 'month', limit: 1_100 }];
    },
  });
  await anthropic(s, KEYS.batch).messages.create(ask({ max_tokens: 100 }));
  await s.settled('batch-summariser');
  const r = await post(s, '/v1/messages', ask(), {
    'x-api-key': KEYS.batch,
    'anthropic-version': '2023-06-01',
  });
  expect(r.status).toBe(429);
  expect(r.body).toMatchObject({
    type: 'error',
    error: {
      type: 'rate_limit_error',
      message: expect.stringMatching(/^budget_exceeded: This call could use up to/),
    },
  });
  expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(r.headers.get('x-holdfast-error-code')).toBe('budget_exceeded');
  expect(s.upstream.stats().requests.messages).toBe(1);
});

test('client disconnect mid-stream: the upstream sees the abort, prompt and streamed output billed, nothing held', async ({
  stack,
}) => {
  const s = await stack({ patch: withClaude, behaviour: GENERATING });
  await expectAbortBilled(s, 'messages', await leaveAfter(s, 10));
});

test('client disconnect while the model stalls: every token streamed before it is billed, to the token', async ({
  stack,
}) => {
  const s = await stack({ patch: withClaude, behaviour: STALLS.behaviour });
  await expectStallBilled(s, 'messages', (n) => leaveAfter(s, n));
});

/** Streams a reply and leaves after `deltas` text deltas; how many the client received. */
async function leaveAfter(s: Stack, deltas: number): Promise<number> {
  const stream = anthropic(s, KEYS.support).messages.stream(ask());
  let received = 0;
  stream.on('text', () => {
    if (++received === deltas) stream.abort();
  });
  // Only the client's own abort ends it quietly: a call that failed (an error status after
  // the SDK's retries) says so here, not as an upstream abort never seen 10 s later.
  await stream.done().catch((err: unknown) => {
    if (!(err instanceof Anthropic.APIUserAbortError)) throw err;
  });
  expect(received).toBe(deltas);
  return received;
}

test('upstream 529 overloaded and 429: retried with backoff, the call served and billed once', async ({
  stack,
}) => {
  const s = await stack({ patch: withClaude });
  s.upstream.failNext({ status: 529, count: 2 });
  const m = await anthropic(s, KEYS.support).messages.create(ask());
  expect(m.stop_reason).toBe('end_turn');
  s.upstream.failNext({ status: 429, count: 1, retryAfter: 0.01 });
  await anthropic(s, KEYS.support).messages.stream(ask()).finalMessage();
  expect(s.upstream.stats().errorsInjected).toMatchObject({ overloaded: 2, '429': 1 });
  expect(s.upstream.stats().requests.messages).toBe(5);
  await billedAsProvider(s, 'support-bot');
});

test('an upstream that ignores max_tokens is cut at the admitted output: stop_reason max_tokens, streaming or not', async ({
  stack,
}) => {
  const s = await stack({ patch: withClaude, behaviour: { ignoreMaxTokens: 300 } });
  const client = anthropic(s, KEYS.support);
  const streamed = await client.messages.stream(ask({ max_tokens: 50 })).finalMessage();
  expect(streamed.stop_reason).toBe('max_tokens');
  const text = (m: { content: { type: string; text?: string }[] }) =>
    m.content.map((b) => (b.type === 'text' ? (b.text ?? '') : '')).join('');
  expect(text(streamed).split(' ').length).toBeLessThanOrEqual(51);
  const { data, response } = await client.messages.create(ask({ max_tokens: 50 })).withResponse();
  expect(data.stop_reason).toBe('max_tokens');
  expect(response.headers.get('x-holdfast-ended')).toBe('output_limit');
  expect(text(data).split(' ').length).toBeLessThanOrEqual(51);
  const usage = await s.settled('support-bot');
  const prompt = Number(response.headers.get('x-holdfast-prompt-tokens'));
  expect(usage.billedTokens).toBeLessThanOrEqual(2 * (prompt + 51));
});

test('vendor length fields never reach the model; the client is told what was dropped', async ({
  stack,
}) => {
  const s = await stack({ patch: withClaude });
  const r = await post(
    s,
    '/v1/messages',
    ask({
      max_tokens: 20,
      n_predict: 5_000,
      max_new_tokens: 5_000,
      max_tokens_to_sample: 5_000,
      n: 4,
    }),
    { 'x-api-key': KEYS.support },
  );
  await expectStripped(s, r, 'n_predict, max_new_tokens, max_tokens_to_sample, n');
});

test('adaptive mode: the hold starts at the estimate and grows as the output streams', async ({
  stack,
}) => {
  const adaptive = (c: TestConfig) => {
    withClaude(c);
    adaptiveBatch(c);
  };
  const s = await stack({ patch: adaptive });
  s.upstream.configure({ completion: { mode: 'fixed', tokens: 50 } });
  for (let i = 0; i < 3; i++) await anthropic(s, KEYS.batch).messages.create(ask());
  await s.settled('batch-summariser');
  s.upstream.configure({ completion: { mode: 'fixed', tokens: 600 } });
  const m = await anthropic(s, KEYS.batch).messages.stream(ask()).finalMessage();
  expect(m.stop_reason).toBe('end_turn');
  expect(m.usage.output_tokens).toBe(600);
  await billedAsProvider(s, 'batch-summariser');
  await expectGrown(s, 'messages');
});
