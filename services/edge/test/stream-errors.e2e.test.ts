import type { HoldfastEvent } from '@holdfast/events';
import { waitFor } from '@holdfast/testkit';
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

// Each surface's body: `n` words of prompt, `max` output tokens.
const claude = (stream: boolean, max = 100, n = 20) => ({
  model: CLAUDE,
  max_tokens: max,
  messages: [{ role: 'user' as const, content: words(n) }],
  stream,
});
const responses = (stream: boolean, max = 100, n = 20) => ({
  model: 'gpt-4o-mini',
  input: words(n),
  max_output_tokens: max,
  stream,
});
const chat = (stream: boolean, max = 100, n = 20) => ({
  model: 'gpt-4o-mini',
  messages: [{ role: 'user' as const, content: words(n) }],
  max_tokens: max,
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

/** The input a body is billed (the provider's usage of it, asked of a mock of its own). */
async function promptOf(path: Path, body: Record<string, unknown>): Promise<number> {
  const mock = await startMockUpstream({ port: 0 });
  try {
    const res = await fetch(`${mock.url}${path.slice('/v1'.length)}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(path === '/v1/messages' ? ANTHROPIC : OPENAI),
      },
      body: JSON.stringify({ ...body, stream: false }),
    });
    const { usage } = (await res.json()) as {
      usage: { input_tokens?: number; prompt_tokens?: number };
    };
    return usage.input_tokens ?? usage.prompt_tokens ?? NaN;
  } finally {
    await mock.stop();
  }
}

type Path = '/v1/messages' | '/v1/responses' | '/v1/chat/completions';

/** A surface's streaming body of `max` output tokens, the fault its first attempt meets, its counter. */
const SURFACES = {
  messages: {
    path: '/v1/messages',
    body: (max: number, n: number) => claude(true, max, n),
    fail: { status: 'error', count: 1 },
    counter: 'messages',
  },
  responses: {
    path: '/v1/responses',
    body: (max: number, n: number) => responses(true, max, n),
    fail: { status: 'error', count: 1, streamError: 'failed' },
    counter: 'responses',
  },
  chat: {
    path: '/v1/chat/completions',
    body: (max: number, n: number) => chat(true, max, n),
    fail: { status: 'error', count: 1 },
    counter: 'chatCompletions',
  },
} as const satisfies Record<
  string,
  {
    path: Path;
    body: (max: number, n: number) => Record<string, unknown>;
    fail: Parameters<Stack['upstream']['failNext']>[0];
    counter: keyof ReturnType<Stack['upstream']['stats']>['requests'];
  }
>;
type Surface = keyof typeof SURFACES;

/** gpt-4o-mini's prices in pico-USD a token (the test config's). */
const MINI = { input: 150_000, output: 600_000 };
const microUsd = (prompt: number, output: number) =>
  Math.ceil((prompt * MINI.input + output * MINI.output) / 1_000_000);

/**
 * A reserve tenant (and its key) whose month holds one call's worst case and `room` more
 * tokens (a `usd` budget: its day, in micro-USD, at gpt-4o-mini's prices); the second attempt
 * writes its whole max_tokens. The first attempt fails inside its stream once the provider
 * billed its prompt (Anthropic after message_start, a Responses `response.failed` with its
 * usage, a chat error chunk): the retry may only use the hold grown by it. Checks every window
 * within its limit, no overrun, one close, nothing held, books as the provider's.
 */
async function tight(
  fx: {
    stack: (o: StackOptions) => Promise<Stack>;
    redis: Parameters<typeof nothingHeldAnywhere>[0];
    iso: { keyPrefix: string };
  },
  surface: Surface,
  room: (prompt: number) => number,
  unit: 'tokens' | 'usd' = 'tokens',
  fail: Parameters<Stack['upstream']['failNext']>[0] = SURFACES[surface].fail,
) {
  const { path, body: bodyOf, counter } = SURFACES[surface];
  const max = 300;
  // A usd budget: a prompt long enough that half its price is several micro-dollars.
  const body = bodyOf(max, unit === 'usd' ? 400 : 20);
  const prompt = await promptOf(path, body);
  const limit =
    unit === 'usd'
      ? microUsd(prompt, max) + room(microUsd(prompt, 0))
      : prompt + max + room(prompt);
  const budget =
    unit === 'usd'
      ? { window: 'day', limit: limit / 1_000_000, unit }
      : { window: 'month', limit, unit };
  const s = await fx.stack({
    patch: (c) => {
      withClaude(c);
      const t = entry(c.tenants, 'support-bot');
      t.budgets = [budget];
      const keys = t.keys as { id: string; budgets?: unknown[] }[];
      keys[0]!.budgets = [budget];
    },
    behaviour: { completion: { mode: 'fraction', fraction: 1 } },
  });
  s.upstream.failNext(fail);
  const r = await raw(s, path, body);
  const usage = await billedAsProvider(s, 'support-bot');
  const billed = s.upstream.stats().billed;
  if (unit === 'usd') {
    expect(usage.billedMicroUsd).toBe(microUsd(billed.promptTokens, billed.completionTokens));
  }
  const windows = [...usage.windows, ...usage.keys.flatMap((k) => k.windows)];
  expect(windows.map((w) => [w.unit, w.limit])).toEqual([
    [unit, limit],
    [unit, limit],
  ]);
  for (const w of windows) expect(w.used).toBeLessThanOrEqual(w.limit);
  expect(usage.overruns.count).toBe(0);
  const closes = await onceClosed(s, 1);
  const events = await s.events();
  expect(events.filter((e) => e.type === 'reservation.overrun')).toEqual([]);
  await nothingHeldAnywhere(fx.redis, fx.iso.keyPrefix);
  const attempts = s.upstream.stats().requests[counter];
  return { s, r, prompt, limit, closes, events, attempts, billed };
}

/** No room: one attempt, its prompt billed, the client gets the API's own error, closed failed. */
function noRoom(t: Awaited<ReturnType<typeof tight>>) {
  expect(t.attempts).toBe(1);
  expect(t.billed).toMatchObject({ promptTokens: t.prompt, completionTokens: 0 });
  expect(outcomes(t.closes)).toEqual(['upstream_error']);
  expect(t.events.filter((e) => e.type === 'reservation.extended')).toEqual([]);
}

/** Room: the hold grew once by the failed attempt, the retry answered, both billed. */
function withRoom(t: Awaited<ReturnType<typeof tight>>, max: number) {
  expect(t.r.status).toBe(200);
  expect(t.attempts).toBe(2);
  expect(t.billed).toMatchObject({ promptTokens: 2 * t.prompt, completionTokens: max });
  expect(outcomes(t.closes)).toEqual(['completed']);
  const grown = t.events.filter((e) => e.type === 'reservation.extended');
  expect(grown).toHaveLength(1);
  expect(grown[0]).toMatchObject({ addedTokens: expect.any(Number) as number });
}

test('reserve: a retry the hold cannot grow for is not sent: the client gets the error, the failed attempt billed, no window past its limit, no overrun', async ({
  stack,
  redis,
  iso,
}) => {
  const t = await tight({ stack, redis, iso }, 'messages', (p) => Math.floor(p / 2));
  expect(t.r.status).toBe(529);
  expect(JSON.parse(t.r.text)).toMatchObject({ error: { type: 'overloaded_error' } });
  noRoom(t);
});

test('reserve: with room, the hold grows by the failed attempt before the retry: both billed within it', async ({
  stack,
  redis,
  iso,
}) => {
  const t = await tight({ stack, redis, iso }, 'messages', (p) => p + 2);
  expect(t.r.text).toContain('message_stop');
  withRoom(t, 300);
});

// The OpenAI surfaces: the failed attempt's prompt billed by a Responses `response.failed`
// (its usage) or a chat error chunk (the edge's count); no room: a 502 upstream_error.
for (const [surface, name, failure, done] of [
  ['responses', 'Responses', 'a response.failed that billed its prompt', '"status":"incomplete"'],
  ['chat', 'Chat', 'an error chunk after the prompt was billed', '[DONE]'],
] as const) {
  test(`reserve, ${name}: ${failure}, no room to grow the hold: not retried, the client gets the API's error`, async ({
    stack,
    redis,
    iso,
  }) => {
    const t = await tight({ stack, redis, iso }, surface, (p) => Math.floor(p / 2));
    expect(t.r.status).toBe(502);
    expect(JSON.parse(t.r.text)).toMatchObject({ error: { code: 'upstream_error' } });
    noRoom(t);
  });

  test(`reserve, ${name}: ${failure}, with room: the hold grows by it before the retry`, async ({
    stack,
    redis,
    iso,
  }) => {
    const t = await tight({ stack, redis, iso }, surface, (p) => p + 2);
    expect(t.r.text).toContain(done);
    expect(t.r.text).not.toMatch(/response\.failed|event: error|"error":\{/);
    withRoom(t, 300);
  });
}

// The hold grows by a failed attempt's bill once the loop will retry it, never for the attempt
// it gives up on: room for two failed prompts is room for all 3 attempts (retries 2), room for
// one is room for 2. Either way the client's error tells the attempts made, on every surface.
// Before, the edge grew the hold before it knew whether the loop would retry: a third extend
// (and `reservation.extended`) for nothing, and, refused, an error that lost "after N attempts".
for (const surface of ['messages', 'responses', 'chat'] as const) {
  for (const retries of [2, 1]) {
    test(`reserve, ${surface}: a server error inside every attempt's stream, room for ${retries} failed prompts: ${retries + 1} attempts, the hold grown for the retries only, the error tells them`, async ({
      stack,
      redis,
      iso,
    }) => {
      const fail = { status: 'error', count: 3, streamError: 'server' } as const;
      const t = await tight({ stack, redis, iso }, surface, (p) => retries * p + 1, 'tokens', fail);
      const attempts = retries + 1;
      expect(t.r.status).toBe(502);
      expect(t.r.text).toContain(`The model upstream failed (500), after ${attempts} attempts.`);
      expect(t.attempts).toBe(attempts);
      expect(t.billed).toMatchObject({ promptTokens: attempts * t.prompt, completionTokens: 0 });
      expect(outcomes(t.closes)).toEqual(['upstream_error']);
      const grown = t.events.filter((e) => e.type === 'reservation.extended');
      expect(grown.map((e) => e.type === 'reservation.extended' && e.addedTokens)).toEqual(
        Array<number>(retries).fill(t.prompt),
      );
    });
  }
}

test('reserve, usd budget (micro-USD): a response.failed whose prompt does not fit is not retried, no window past its limit', async ({
  stack,
  redis,
  iso,
}) => {
  const none = await tight({ stack, redis, iso }, 'responses', (c) => Math.floor(c / 2), 'usd');
  expect(none.r.status).toBe(502);
  noRoom(none);
});

test("reserve, usd budget (micro-USD): with room for the failed attempt's prompt the hold grows and the retry is sent, within the limit", async ({
  stack,
  redis,
  iso,
}) => {
  const room = await tight({ stack, redis, iso }, 'chat', (c) => c + 2, 'usd');
  withRoom(room, 300);
});

/** A Claude stack whose replies begin `latencyMs` after their opening events, held back `holdBackMs`. */
function slowToBegin(
  stack: (o: StackOptions) => Promise<Stack>,
  latencyMs: number,
  holdBackMs: number,
): Promise<Stack> {
  return stack({
    patch: withClaude,
    behaviour: { firstTokenLatencyMs: latencyMs },
    edge: { options: { streamHoldBackMs: holdBackMs } },
  });
}

/** A streamed Messages call: its response once the head came, and how long that took. */
async function head(s: Stack): Promise<{ res: Response; ms: number }> {
  const started = Date.now();
  const res = await fetch(`${s.edge.url}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...ANTHROPIC },
    body: JSON.stringify(claude(true)),
  });
  return { res, ms: Date.now() - started };
}

test('a reply slow to begin gets its head and opening events after EDGE_STREAM_HOLD_BACK_MS; an error after that is not retried, the stream ends in it', async ({
  stack,
}) => {
  const s = await slowToBegin(stack, 3_000, 100);
  const { res, ms } = await head(s);
  // The head came before the first token did (3 s after the opening events).
  expect(res.status).toBe(200);
  expect(ms).toBeLessThan(2_500);
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

test('a server error inside the stream on every attempt: every surface answers 502 in its own shape (api_error, upstream_error), saying it was retried, streaming or not; each attempt billed, the hold closed once', async ({
  stack,
}) => {
  const s = await stack({ patch: withClaude });
  const cases = [
    ['/v1/messages', claude],
    ['/v1/responses', responses],
    ['/v1/chat/completions', chat],
  ] as const;
  for (const [path, body] of cases) {
    for (const stream of [true, false]) {
      s.upstream.failNext({ status: 'error', count: 3, streamError: 'server' });
      const r = await raw(s, path, body(stream));
      expect(r.status, `${path} stream ${stream}`).toBe(502);
      const err = JSON.parse(r.text) as { error: { type: string; code?: string; message: string } };
      if (path === '/v1/messages') {
        expect(err).toMatchObject({ type: 'error', error: { type: 'api_error' } });
        expect(err.error.message).toMatch(/^upstream_error: /);
      } else {
        expect(err).toMatchObject({ error: { code: 'upstream_error', type: 'server_error' } });
      }
      expect(err.error.message, `${path} stream ${stream}`).toMatch(
        /failed \(500\), after 3 attempts/,
      );
    }
  }
  expect(s.upstream.stats().requests).toMatchObject({
    messages: 6,
    responses: 6,
    chatCompletions: 6,
  });
  await billedAsProvider(s, 'support-bot');
  expect(outcomes(await onceClosed(s, 6))).toEqual(Array<string>(6).fill('upstream_error'));
  // The hold grew for the 2 retries of each call, not for the attempt not retried.
  const events = await s.events();
  expect(events.filter((e) => e.type === 'reservation.extended')).toHaveLength(6 * 2);
});

test('EDGE_STREAM_HOLD_BACK_MS bounds the whole call, not each attempt: a retry that is slow to begin gets the head at the deadline, and its error then ends the stream', async ({
  stack,
}) => {
  // Each attempt fails 800 ms after its opening events; the head is held back 1 s at most.
  const s = await slowToBegin(stack, 800, 1_000);
  s.upstream.failNext({ status: 'error', count: 2 });
  const { res, ms } = await head(s);
  // The first attempt failed at 0.8 s, before the deadline: retried. The second would fail at
  // 1.6 s: the head went at 1 s, so that error is the stream's end, not another retry.
  const text = await res.text();
  expect(res.status).toBe(200);
  expect(ms).toBeLessThan(1_500);
  expect(text.match(/event: message_start/g)).toHaveLength(1);
  expect(text.match(/event: error/g)).toHaveLength(1);
  expect(text).not.toContain('message_stop');
  expect(s.upstream.stats().requests.messages).toBe(2);
  await billedAsProvider(s, 'support-bot');
  expect(outcomes(await onceClosed(s, 1))).toEqual(['upstream_error']);
});

test('a client that hangs up while the retry is held back: the retry is hung up on, the hold (grown for it) closed once with both attempts billed, nothing held', async ({
  stack,
  redis,
  iso,
}) => {
  const s = await slowToBegin(stack, 2_000, 10_000);
  // The first attempt fails at once after message_start (its prompt billed); the retry's
  // first token comes 2 s after its opening events, held back meanwhile.
  s.upstream.failNext({ status: 'error', count: 1 });
  const abort = new AbortController();
  const res = fetch(`${s.edge.url}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...ANTHROPIC },
    body: JSON.stringify(claude(true)),
    signal: abort.signal,
  });
  await waitFor(() => s.upstream.stats().requests.messages === 2 || undefined, {
    what: 'the retry upstream',
  });
  abort.abort();
  await expect(res).rejects.toThrow();
  await waitFor(() => s.upstream.stats().abortedByClient === 1 || undefined, {
    what: 'the retry hung up on',
  });
  await billedAsProvider(s, 'support-bot');
  const closes = await onceClosed(s, 1);
  expect(outcomes(closes)).toEqual(['client_disconnected']);
  expect(s.upstream.stats().billed.completionTokens).toBe(0);
  await nothingHeldAnywhere(redis, iso.keyPrefix);
});

test('an error that comes just as EDGE_STREAM_HOLD_BACK_MS ends: either retried before the head or the end of a stream that began, never both: one head, at most one error, books as the provider billed, one close per call', async ({
  stack,
}) => {
  // The first attempt's error comes 300 ms after its opening events: as the hold back ends.
  const s = await slowToBegin(stack, 300, 300);
  const calls = 6;
  const seen: string[] = [];
  for (let i = 0; i < calls; i++) {
    s.upstream.failNext({ status: 'error', count: 1 });
    const { res } = await head(s);
    const text = await res.text();
    expect(res.status).toBe(200);
    expect(text.match(/event: message_start/g)).toHaveLength(1);
    const errors = text.match(/event: error/g)?.length ?? 0;
    // Retried (the answer, no error) or not (the error ends it, no message_stop).
    expect(errors === 0 ? text.includes('message_stop') : !text.includes('message_stop')).toBe(
      true,
    );
    expect(errors).toBeLessThanOrEqual(1);
    seen.push(errors === 0 ? 'retried' : 'ended');
  }
  console.log(`an error at the hold back's end: ${seen.join(', ')}`);
  await billedAsProvider(s, 'support-bot');
  const closes = outcomes(await onceClosed(s, calls));
  expect(closes.filter((o) => o === 'upstream_error')).toHaveLength(
    seen.filter((x) => x === 'ended').length,
  );
});
