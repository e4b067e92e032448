import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import {
  apiError as failure,
  chat,
  edgeTest as test,
  entry,
  KEYS,
  type Stack,
  UNREAD_AT_HANGUP,
} from './harness.js';
import { GENERATING, STALLS } from './surfaces.js';

/**
 * No code path leaves a hold behind: after every failure the tenant holds nothing and has no
 * call in flight, and what the authority billed is what the provider billed (the mock counts
 * the prompt and every token it sent, also for aborted and dropped streams).
 */
async function expectNoHoldAndProviderBilling(s: Stack, opts: { cut?: boolean } = {}) {
  const usage = await s.settled('support-bot');
  const billed = s.upstream.stats().billed;
  const provider = billed.promptTokens + billed.completionTokens;
  // When the edge cuts a stream, tokens the provider had already sent may still be on the
  // wire: the provider bills them, the edge never received them.
  expect(usage.billedTokens).toBeLessThanOrEqual(provider);
  expect(usage.billedTokens).toBeGreaterThanOrEqual(provider - (opts.cut ? UNREAD_AT_HANGUP : 0));
  return usage;
}

async function outcomeOf(s: Stack, type: 'reservation.settled' | 'reservation.released') {
  const events = await s.events((e) => e.some((x) => x.type === type));
  return events.find((e) => e.type === type);
}

/** Streams a chat reply and leaves after `deltas` content chunks; checks it received them. */
async function leaveAfter(s: Stack, deltas: number): Promise<void> {
  const aborter = new AbortController();
  const stream = await s
    .openai(KEYS.support)
    .chat.completions.create({ ...chat(20), stream: true }, { signal: aborter.signal });
  let received = 0;
  // The SDK ends the iteration quietly when its own signal aborts it.
  for await (const chunk of stream) {
    if (chunk.choices[0]?.delta.content) received++;
    if (received === deltas) aborter.abort();
  }
  expect(received).toBe(deltas);
  await waitFor(() => s.upstream.stats().abortedByClient === 1, { what: 'the upstream abort' });
}

test('client disconnect mid-stream: the upstream sees the abort, the ledger has prompt + streamed output', async ({
  stack,
}) => {
  const s = await stack({ behaviour: GENERATING });
  await leaveAfter(s, 10);
  const usage = await expectNoHoldAndProviderBilling(s, { cut: true });
  expect(usage.billedTokens).toBeGreaterThanOrEqual(27 + 10);
  expect(usage.billedTokens).toBeLessThan(27 + 400);
  expect(await outcomeOf(s, 'reservation.settled')).toMatchObject({
    outcome: 'client_disconnected',
    promptTokens: 27,
  });
});

test('client disconnect while the model stalls: every token streamed before it is billed, to the token', async ({
  stack,
}) => {
  const s = await stack({ behaviour: STALLS.behaviour });
  s.upstream.failNext(STALLS.fail);
  await leaveAfter(s, STALLS.fail.afterTokens);
  // The model wrote nothing after the edge hung up: nothing is left for UNREAD_AT_HANGUP.
  const usage = await expectNoHoldAndProviderBilling(s);
  expect(usage.billedTokens).toBe(27 + STALLS.fail.afterTokens);
  expect(await outcomeOf(s, 'reservation.settled')).toMatchObject({
    outcome: 'client_disconnected',
  });
});

test('client disconnect while a non-streaming reply is generated: aborted upstream, usage so far', async ({
  stack,
}) => {
  const s = await stack({ behaviour: GENERATING });
  const aborter = new AbortController();
  const call = s
    .openai(KEYS.support)
    .chat.completions.create(chat(20), { signal: aborter.signal })
    .catch(() => 'aborted');
  // The edge streams from the upstream even for a non-streaming client: wait for tokens.
  await waitFor(async () => (await s.usage('support-bot')).inFlight === 1);
  await waitFor(() => s.upstream.stats().inFlight === 1);
  aborter.abort();
  expect(await call).toBe('aborted');
  await waitFor(() => s.upstream.stats().abortedByClient === 1, { what: 'the upstream abort' });
  await expectNoHoldAndProviderBilling(s, { cut: true });
  expect(await outcomeOf(s, 'reservation.settled')).toMatchObject({
    outcome: 'client_disconnected',
  });
});

test('upstream 500 on every attempt: released, nothing billed, 502 upstream_error', async ({
  stack,
}) => {
  const s = await stack();
  s.upstream.failNext({ status: 500, count: 3 });
  const err = await failure(s.openai(KEYS.support).chat.completions.create(chat()));
  expect(err.status).toBe(502);
  expect(err.code).toBe('upstream_error');
  expect(s.upstream.stats().errorsInjected['500']).toBe(3);
  const usage = await expectNoHoldAndProviderBilling(s);
  expect(usage.billedTokens).toBe(0);
  expect(await outcomeOf(s, 'reservation.released')).toMatchObject({ reason: 'upstream_error' });
});

test('upstream 500 then success: the retry serves the call, billed once', async ({ stack }) => {
  const s = await stack();
  s.upstream.failNext({ status: 500, count: 2 });
  const r = await s.openai(KEYS.support).chat.completions.create(chat());
  expect(r.usage?.completion_tokens).toBe(50);
  expect(s.upstream.stats().requests.chatCompletions).toBe(3);
  expect((await expectNoHoldAndProviderBilling(s)).billedTokens).toBe(77);
});

test('upstream 429 after retries goes to the fallback upstream; a long Retry-After is not waited for', async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => (entry(c.models, 'gpt-4o-mini').fallbackUpstreams = ['backup']),
  });
  s.upstream.failNext({ status: 429, count: 3, retryAfter: 0.01 });
  await s.openai(KEYS.support).chat.completions.create(chat());
  expect(s.upstream.stats().errorsInjected['429']).toBe(3);
  expect(s.upstream.stats().completed).toBe(1);

  // An hour's Retry-After: straight to the fallback (one 429, then served).
  s.upstream.reset();
  s.upstream.failNext({ status: 429, count: 1, retryAfter: 3_600 });
  await s.openai(KEYS.support).chat.completions.create(chat());
  expect(s.upstream.stats().errorsInjected['429']).toBe(1);
  expect(s.upstream.stats().completed).toBe(1);
  await s.settled('support-bot');

  // Both rate limited: 429 upstream_rate_limited with the upstream's Retry-After.
  s.upstream.failNext({ status: 429, count: 2, retryAfter: 5 });
  const err = await failure(s.openai(KEYS.support).chat.completions.create(chat()));
  expect(err.status).toBe(429);
  expect(err.code).toBe('upstream_rate_limited');
  expect(err.headers?.get('retry-after')).toBe('5');
  await s.settled('support-bot');
});

test('upstream hangs before answering: the first-byte timeout fires, the prompt is settled', async ({
  stack,
}) => {
  const s = await stack({ edge: { options: { upstream: { firstByteTimeoutMs: 300 } } } });
  s.upstream.failNext({ status: 'hang' });
  const err = await failure(s.openai(KEYS.support).chat.completions.create(chat()));
  expect(err.status).toBe(504);
  expect(err.code).toBe('upstream_timeout');
  await waitFor(() => s.upstream.stats().abortedByClient === 1);
  // No retry of a call the provider may have read: one request, prompt billed once.
  expect(s.upstream.stats().requests.chatCompletions).toBe(1);
  expect((await expectNoHoldAndProviderBilling(s)).billedTokens).toBe(27);
  expect(await outcomeOf(s, 'reservation.settled')).toMatchObject({ outcome: 'timeout' });
});

test('upstream stalls mid-stream: the idle timeout ends it with an SSE error, streamed output settled', async ({
  stack,
}) => {
  const s = await stack({ edge: { options: { upstream: { idleTimeoutMs: 300 } } } });
  s.upstream.failNext({ status: 'hang', afterTokens: 7 });
  const stream = await s.openai(KEYS.support).chat.completions.create({ ...chat(), stream: true });
  let received = 0;
  const err = await failure(
    (async () => {
      for await (const chunk of stream) if (chunk.choices[0]?.delta.content) received++;
    })(),
  );
  expect(received).toBe(7);
  expect(err.code).toBe('upstream_timeout');
  await waitFor(() => s.upstream.stats().abortedByClient === 1);
  expect((await expectNoHoldAndProviderBilling(s)).billedTokens).toBe(27 + 7);
  expect(await outcomeOf(s, 'reservation.settled')).toMatchObject({ outcome: 'timeout' });
});

test("the upstream's whole-call timeout ends a slow stream and settles what it produced", async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => (entry(c.upstreams, 'default').timeoutMs = 400),
    behaviour: { tokenDelayMs: 50, completion: { mode: 'fixed', tokens: 100 } },
  });
  const err = await failure(s.openai(KEYS.support).chat.completions.create(chat()));
  expect(err.status).toBe(504);
  await waitFor(() => s.upstream.stats().abortedByClient === 1);
  const usage = await expectNoHoldAndProviderBilling(s, { cut: true });
  expect(usage.billedTokens).toBeGreaterThan(27);
  expect(usage.billedTokens).toBeLessThan(127);
});

test('connection dropped mid-stream: streaming and non-streaming clients, what streamed is settled', async ({
  stack,
}) => {
  const s = await stack();
  s.upstream.failNext({ status: 'drop', afterTokens: 10 });
  const stream = await s.openai(KEYS.support).chat.completions.create({ ...chat(), stream: true });
  const err = await failure(
    (async () => {
      for await (const _ of stream);
    })(),
  );
  expect(err.code).toBe('upstream_error');
  expect((await expectNoHoldAndProviderBilling(s)).billedTokens).toBe(27 + 10);

  s.upstream.failNext({ status: 'drop', afterTokens: 5 });
  const err2 = await failure(s.openai(KEYS.support).chat.completions.create(chat()));
  expect(err2.status).toBe(502);
  expect((await expectNoHoldAndProviderBilling(s)).billedTokens).toBe(27 + 10 + 27 + 5);
});

test('an upstream that cannot be reached: retried, then released', async ({ stack }) => {
  const s = await stack({
    patch: (c) => (entry(c.upstreams, 'default').baseUrl = 'http://127.0.0.1:9/v1'),
  });
  const err = await failure(s.openai(KEYS.support).chat.completions.create(chat()));
  expect(err.status).toBe(502);
  expect((await s.settled('support-bot')).billedTokens).toBe(0);
  expect(await outcomeOf(s, 'reservation.released')).toMatchObject({ reason: 'upstream_error' });
});

test('an admit that gets no answer is abandoned with a release, and the call fails closed', async ({
  stack,
  nc,
  iso,
}) => {
  const s = await stack({ edge: { options: { admitTimeoutMs: 200 } } });
  await s.stopAuthority();
  // Something answers releases but never admits (a stuck authority).
  const releases: string[] = [];
  const sink = nc.subscribe(`${iso.names.authorityPrefix}.admit`, { callback: () => undefined });
  const rel = nc.subscribe(`${iso.names.authorityPrefix}.release`, {
    callback: (_err, msg) => {
      releases.push(msg.string());
      msg.respond(
        JSON.stringify({ status: 'unknown', billedTokens: 0, costMicroUsd: 0, windows: [] }),
      );
    },
  });
  try {
    const err = await failure(s.openai(KEYS.support).chat.completions.create(chat()));
    expect(err.status).toBe(503);
    expect(err.code).toBe('budget_authority_unavailable');
    await waitFor(() => releases.length === 1);
    expect(JSON.parse(releases[0]!)).toMatchObject({
      tenant: 'support-bot',
      reason: 'admit_abandoned',
    });
    expect(s.upstream.stats().requests.chatCompletions).toBe(0);
  } finally {
    sink.unsubscribe();
    rel.unsubscribe();
  }
});
