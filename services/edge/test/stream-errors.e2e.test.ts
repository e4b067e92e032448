import type { HoldfastEvent } from '@holdfast/events';
import { expect } from 'vitest';
import { startMockUpstream } from '@holdfast/mock-upstream';
import {
  edgeTest as test,
  entry,
  KEYS,
  nothingHeldAnywhere,
  type Stack,
  type StackOptions,
} from './harness.js';
import {
  anthropic,
  billedAsProvider,
  CLAUDE,
  clientError,
  post,
  withClaude,
  words,
} from './surfaces.js';

/**
 * Upstream failures that arrive inside a 200 stream: Anthropic's `event: error` (overloaded,
 * rate limited), a Responses `error` event or `response.failed`, a chat error chunk. Before
 * anything reached the client they are retried as the status they stand for (same backoff,
 * same attempts, same hold); after, the client's stream ends in the API's own error shape.
 * Either way: one hold, one close, books equal to what the provider billed (the mock bills
 * each failed attempt's prompt, as it read it), nothing held.
 */

const claude = (stream: boolean) => ({
  model: CLAUDE,
  max_tokens: 100,
  messages: [{ role: 'user' as const, content: words(20) }],
  stream,
});
const responses = (stream: boolean) => ({
  model: 'gpt-4o-mini',
  input: words(20),
  max_output_tokens: 100,
  stream,
});
const chat = (stream: boolean) => ({
  model: 'gpt-4o-mini',
  messages: [{ role: 'user' as const, content: words(20) }],
  max_tokens: 100,
  stream,
});
const OPENAI = { authorization: `Bearer ${KEYS.support}` };
const ANTHROPIC = { 'x-api-key': KEYS.support, 'anthropic-version': '2023-06-01' };

/** A raw call: its status and body text (a stream's whole text). */
async function raw(s: Stack, path: string, body: Record<string, unknown>) {
  const headers = path === '/v1/messages' ? ANTHROPIC : OPENAI;
  const res = await fetch(`${s.edge.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

/** Every admission has exactly one close; returns the closes. */
async function onceClosed(s: Stack, admissions: number): Promise<HoldfastEvent[]> {
  const isClose = (e: HoldfastEvent) =>
    e.type === 'reservation.settled' ||
    e.type === 'reservation.released' ||
    e.type === 'reservation.expired';
  const events = await s.events((all) => all.filter(isClose).length >= admissions);
  const created = events.filter((e) => e.type === 'reservation.created');
  const closes = events.filter(isClose);
  expect(created).toHaveLength(admissions);
  expect(closes).toHaveLength(admissions);
  expect(new Set(closes.map((e) => e.reservationId)).size).toBe(admissions);
  return closes;
}

const outcomes = (closes: HoldfastEvent[]) =>
  closes.map((e) => (e.type === 'reservation.settled' ? e.outcome : e.type));

test('Messages: an error event before any content is retried like its status; the client gets the answer, one hold, both attempts billed as the provider billed them', async ({
  stack,
}) => {
  const s = await stack({ patch: withClaude });
  s.upstream.failNext({ status: 'error', count: 1 });
  const streamed = await anthropic(s, KEYS.support).messages.stream(claude(true)).finalMessage();
  expect(streamed.stop_reason).toBe('end_turn');
  s.upstream.failNext({ status: 'error', count: 2, streamError: 'rate_limit' });
  const plain = await anthropic(s, KEYS.support).messages.create({
    ...claude(false),
    stream: false,
  });
  expect(plain.stop_reason).toBe('end_turn');
  expect(s.upstream.stats().requests.messages).toBe(5);
  expect(s.upstream.stats().errorsInjected).toMatchObject({ error: 3 });
  await billedAsProvider(s, 'support-bot');
  expect(outcomes(await onceClosed(s, 2))).toEqual(['completed', 'completed']);
});

test('Messages: retries run out: 529 overloaded_error to a streaming and a non-streaming client, every attempt billed as the provider billed it, the hold closed once', async ({
  stack,
}) => {
  const s = await stack({ patch: withClaude });
  for (const stream of [false, true]) {
    s.upstream.failNext({ status: 'error', count: 3 });
    const err = await clientError(
      stream
        ? anthropic(s, KEYS.support).messages.stream(claude(true)).finalMessage()
        : anthropic(s, KEYS.support).messages.create({ ...claude(false), stream: false }),
    );
    expect(err.status).toBe(529);
    expect(err.error).toMatchObject({ type: 'error', error: { type: 'overloaded_error' } });
  }
  expect(s.upstream.stats().requests.messages).toBe(6);
  await billedAsProvider(s, 'support-bot');
  expect(outcomes(await onceClosed(s, 2))).toEqual(['upstream_error', 'upstream_error']);
});

test('Responses: an error event or response.failed before any content is retried; retries run out: 503 overloaded, 429 rate limited', async ({
  stack,
}) => {
  const s = await stack({});
  for (const streamError of ['overloaded', 'failed'] as const) {
    for (const stream of [true, false]) {
      s.upstream.failNext({ status: 'error', count: 1, streamError });
      const r = await raw(s, '/v1/responses', responses(stream));
      expect(r.status).toBe(200);
      expect(r.text).toContain('"status":"completed"');
      expect(r.text).not.toContain('"type":"error"');
      expect(r.text).not.toContain('response.failed');
    }
  }
  s.upstream.failNext({ status: 'error', count: 3, streamError: 'overloaded' });
  const overloaded = await raw(s, '/v1/responses', responses(true));
  expect(overloaded.status).toBe(503);
  expect(JSON.parse(overloaded.text)).toMatchObject({ error: { code: 'upstream_overloaded' } });
  s.upstream.failNext({ status: 'error', count: 3, streamError: 'rate_limit' });
  const limited = await post(s, '/v1/responses', responses(false), OPENAI);
  expect(limited.status).toBe(429);
  expect(limited.body).toMatchObject({ error: { code: 'upstream_rate_limited' } });
  expect(s.upstream.stats().requests.responses).toBe(4 * 2 + 3 + 3);
  await billedAsProvider(s, 'support-bot');
  const closes = outcomes(await onceClosed(s, 6));
  expect(closes).toEqual([
    ...Array<string>(4).fill('completed'),
    'upstream_error',
    'upstream_error',
  ]);
});

test('Chat: an error chunk before any content is retried; after content the stream ends with it, no retry, settled to what streamed', async ({
  stack,
}) => {
  const s = await stack({});
  for (const stream of [true, false]) {
    s.upstream.failNext({ status: 'error', count: 1 });
    const r = await raw(s, '/v1/chat/completions', chat(stream));
    expect(r.status).toBe(200);
    expect(r.text).not.toContain('"error"');
  }
  s.upstream.failNext({ status: 'error', afterTokens: 5 });
  const cut = await raw(s, '/v1/chat/completions', chat(true));
  expect(cut.status).toBe(200);
  expect(cut.text.match(/"error"/g)).toHaveLength(1);
  expect(cut.text).not.toContain('[DONE]');
  expect(s.upstream.stats().requests.chatCompletions).toBe(5);
  await billedAsProvider(s, 'support-bot');
  const closes = outcomes(await onceClosed(s, 3));
  expect(closes).toEqual(['completed', 'completed', 'upstream_error']);
});

test('after content was forwarded: Messages and Responses streams end in their own error shape, never retried, settled to what streamed (response.failed too)', async ({
  stack,
}) => {
  const s = await stack({ patch: withClaude });
  s.upstream.failNext({ status: 'error', afterTokens: 5 });
  const m = await raw(s, '/v1/messages', claude(true));
  expect(m.status).toBe(200);
  expect(m.text.match(/event: error/g)).toHaveLength(1);
  expect(m.text).toContain('overloaded_error');
  expect(m.text).not.toContain('message_stop');
  s.upstream.failNext({ status: 'error', afterTokens: 5, streamError: 'failed' });
  const r = await raw(s, '/v1/responses', responses(true));
  expect(r.status).toBe(200);
  expect(r.text.match(/event: response\.failed/g)).toHaveLength(1);
  expect(r.text).not.toContain('event: error');
  s.upstream.failNext({ status: 'error', afterTokens: 5, streamError: 'failed' });
  const plain = await raw(s, '/v1/responses', responses(false));
  expect(plain.status).toBe(502);
  expect(JSON.parse(plain.text)).toMatchObject({ error: { code: 'upstream_error' } });
  expect(s.upstream.stats().requests).toMatchObject({ messages: 1, responses: 2 });
  await billedAsProvider(s, 'support-bot');
  const closes = outcomes(await onceClosed(s, 3));
  expect(closes).toEqual(['upstream_error', 'upstream_error', 'upstream_error']);
});

/** The input a Messages body is billed (the mock's count_tokens, on a mock of its own). */
async function promptOf(body: Record<string, unknown>): Promise<number> {
  const mock = await startMockUpstream({ port: 0 });
  try {
    const { max_tokens: _max, stream: _stream, ...counted } = body;
    const res = await fetch(`${mock.url}/messages/count_tokens`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...ANTHROPIC },
      body: JSON.stringify(counted),
    });
    return ((await res.json()) as { input_tokens: number }).input_tokens;
  } finally {
    await mock.stop();
  }
}

/**
 * A reserve tenant (and its key) whose month holds one call's worst case and `room` more
 * tokens; the second attempt writes its whole max_tokens. The first attempt fails after
 * message_start (the provider billed its prompt): the retry may only use the hold grown by it.
 */
async function tight(
  fx: {
    stack: (o: StackOptions) => Promise<Stack>;
    redis: Parameters<typeof nothingHeldAnywhere>[0];
    iso: { keyPrefix: string };
  },
  room: (prompt: number) => number,
) {
  const body = { ...claude(true), max_tokens: 300 };
  const prompt = await promptOf(body);
  const limit = prompt + body.max_tokens + room(prompt);
  const s = await fx.stack({
    patch: (c) => {
      withClaude(c);
      const t = entry(c.tenants, 'support-bot');
      t.budgets = [{ window: 'month', limit, unit: 'tokens' }];
      const keys = t.keys as { id: string; budgets?: unknown[] }[];
      keys[0]!.budgets = [{ window: 'month', limit, unit: 'tokens' }];
    },
    behaviour: { completion: { mode: 'fraction', fraction: 1 } },
  });
  s.upstream.failNext({ status: 'error', count: 1 });
  const r = await raw(s, '/v1/messages', body);
  await billedAsProvider(s, 'support-bot');
  const usage = await s.settled('support-bot');
  for (const w of [...usage.windows, ...usage.keys.flatMap((k) => k.windows)]) {
    expect(w.used).toBeLessThanOrEqual(limit);
  }
  expect(usage.keys).toHaveLength(1);
  expect(usage.overruns.count).toBe(0);
  const closes = await onceClosed(s, 1);
  const events = await s.events();
  expect(events.filter((e) => e.type === 'reservation.overrun')).toEqual([]);
  await nothingHeldAnywhere(fx.redis, fx.iso.keyPrefix);
  return { s, r, prompt, limit, closes, events };
}

test('reserve: a retry the hold cannot grow for is not sent: the client gets the error, the failed attempt billed, no window past its limit, no overrun', async ({
  stack,
  redis,
  iso,
}) => {
  const { s, r, prompt, closes } = await tight({ stack, redis, iso }, (p) => Math.floor(p / 2));
  expect(r.status).toBe(529);
  expect(JSON.parse(r.text)).toMatchObject({ error: { type: 'overloaded_error' } });
  expect(s.upstream.stats().requests.messages).toBe(1);
  expect(s.upstream.stats().billed.promptTokens).toBe(prompt);
  expect(outcomes(closes)).toEqual(['upstream_error']);
});

test('reserve: with room, the hold grows by the failed attempt before the retry: both billed within it', async ({
  stack,
  redis,
  iso,
}) => {
  const { s, r, prompt, closes, events } = await tight({ stack, redis, iso }, (p) => p + 2);
  expect(r.status).toBe(200);
  expect(r.text).toContain('message_stop');
  expect(s.upstream.stats().requests.messages).toBe(2);
  expect(s.upstream.stats().billed.promptTokens).toBe(2 * prompt);
  expect(outcomes(closes)).toEqual(['completed']);
  const grown = events.filter((e) => e.type === 'reservation.extended');
  expect(grown).toHaveLength(1);
  expect(grown[0]).toMatchObject({ addedTokens: expect.any(Number) as number });
});

test('a reply slow to begin gets its head and opening events after EDGE_STREAM_HOLD_BACK_MS; an error after that is not retried, the stream ends in it', async ({
  stack,
}) => {
  const s = await stack({
    patch: withClaude,
    behaviour: { firstTokenLatencyMs: 3_000 },
    edge: { options: { streamHoldBackMs: 100 } },
  });
  const started = Date.now();
  const res = await fetch(`${s.edge.url}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...ANTHROPIC },
    body: JSON.stringify(claude(true)),
  });
  // The head came before the first token did (3 s after the opening events).
  expect(res.status).toBe(200);
  expect(Date.now() - started).toBeLessThan(2_500);
  expect(await res.text()).toContain('message_stop');
  s.upstream.failNext({ status: 'error', count: 1 });
  const failed = await raw(s, '/v1/messages', claude(true));
  expect(failed.status).toBe(200);
  expect(failed.text.match(/event: error/g)).toHaveLength(1);
  expect(failed.text).toContain('message_start');
  expect(s.upstream.stats().requests.messages).toBe(2);
  await billedAsProvider(s, 'support-bot');
  expect(outcomes(await onceClosed(s, 2))).toEqual(['completed', 'upstream_error']);
});

test('post mode: nothing is held against a limit, so a failed attempt that billed its prompt is retried without growing a hold', async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      withClaude(c);
      entry(c.tenants, 'support-bot').mode = 'post';
    },
  });
  s.upstream.failNext({ status: 'error', count: 1 });
  const r = await raw(s, '/v1/messages', claude(true));
  expect(r.status).toBe(200);
  expect(r.text).toContain('message_stop');
  expect(s.upstream.stats().requests.messages).toBe(2);
  await billedAsProvider(s, 'support-bot');
  expect(outcomes(await onceClosed(s, 1))).toEqual(['completed']);
  const events = await s.events();
  expect(events.filter((e) => e.type === 'reservation.extended')).toEqual([]);
});
