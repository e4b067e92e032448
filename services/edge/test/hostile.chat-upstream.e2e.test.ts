import { expect } from 'vitest';
import { startOwnRedis, waitFor } from '@holdfast/testkit';
import { edgeTest as test, entry, KEYS, type Stack } from './harness.js';
import { chatBody, chunk, content, DONE, finish, stream, usage } from './chat-chunks.js';
import { scriptedStack } from './scripted-upstream.js';

/**
 * Red team, Chat Completions streams as no provider means to write them (found by an audit of
 * the chat surface), from an upstream the test scripts chunk by chunk.
 */

/** The usage the scripted provider reports (not the edge's own count of prompt or reply). */
const USAGE = { prompt_tokens: 30, completion_tokens: 12, total_tokens: 42 };

async function call(
  s: Stack,
  streamed: boolean,
  extra: object = {},
): Promise<{ status: number; text: string }> {
  const res = await fetch(`${s.edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEYS.support}` },
    body: chatBody(streamed, extra),
  });
  return { status: res.status, text: await res.text() };
}

/**
 * A streamed call read until `word` arrived (the rest is left unread): the abort that makes
 * the client leave, the prompt the edge counted, and what the client got.
 */
async function streamUntil(
  s: Stack,
  extra: object,
  word: string,
): Promise<{ aborter: AbortController; prompt: number; received: string }> {
  const aborter = new AbortController();
  const res = await fetch(`${s.edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEYS.support}` },
    body: chatBody(true, extra),
    signal: aborter.signal,
  });
  expect(res.status).toBe(200);
  const prompt = Number(res.headers.get('x-holdfast-prompt-tokens'));
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let received = '';
  while (!received.includes(word)) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended before ${JSON.stringify(word)}`);
    received += decoder.decode(value, { stream: true });
  }
  return { aborter, prompt, received };
}

test('the connection lost after the usage chunk, before [DONE]: the client gets the completion it was billed for, not a 502', async ({
  stack,
}) => {
  const { s, up } = await scriptedStack(stack);
  try {
    stream(up, (res) => {
      for (const e of [...content(10), finish(), usage(USAGE)]) res.write(e);
      setTimeout(() => res.destroy(), 50);
    });
    let before = (await s.settled('support-bot')).billedTokens;
    for (const streamed of [false, true]) {
      const r = await call(s, streamed);
      expect(r.status).toBe(200);
      if (streamed) {
        expect(r.text).toContain('"usage":{"prompt_tokens":30');
        expect(r.text).not.toContain('"error"');
        expect(r.text.endsWith(DONE)).toBe(true);
      } else {
        expect(JSON.parse(r.text)).toMatchObject({
          choices: [{ finish_reason: 'stop' }],
          usage: { prompt_tokens: 30, completion_tokens: 12 },
        });
      }
      const after = (await s.settled('support-bot')).billedTokens;
      expect(after - before).toBe(42);
      before = after;
    }
  } finally {
    await up.stop();
  }
});

test("a later usage chunk with counts that are not counts does not wipe out the provider's usage", async ({
  stack,
}) => {
  const { s, up } = await scriptedStack(stack);
  try {
    let before = (await s.settled('support-bot')).billedTokens;
    const bad: unknown[] = [
      {},
      { prompt_tokens: null, completion_tokens: null },
      { prompt_tokens: '30', completion_tokens: '12' },
      { prompt_tokens: -1, completion_tokens: -5 },
      { prompt_tokens: 1e12, completion_tokens: 12 },
    ];
    for (const later of bad) {
      stream(up, (res) => {
        for (const e of [...content(10), finish(), usage(USAGE), usage(later)]) res.write(e);
        res.end(DONE);
      });
      for (const streamed of [false, true]) {
        const r = await call(s, streamed);
        expect(r.status).toBe(200);
        if (!streamed) {
          expect(JSON.parse(r.text)).toMatchObject({
            usage: { prompt_tokens: 30, completion_tokens: 12 },
          });
        }
        const after = (await s.settled('support-bot')).billedTokens;
        expect({ later, billed: after - before }).toEqual({ later, billed: 42 });
        before = after;
      }
    }
  } finally {
    await up.stop();
  }
});

test('the upstream idles without [DONE]: a call it finished and reported is completed, one it did not is a timeout billed what streamed', async ({
  stack,
}) => {
  const { s: s0, up } = await scriptedStack((o) =>
    stack({ ...o, edge: { options: { upstream: { idleTimeoutMs: 300 } } } }),
  );
  const s = s0;
  try {
    let before = (await s.settled('support-bot')).billedTokens;
    stream(up, (res) => {
      for (const e of [...content(10), finish(), usage(USAGE)]) res.write(e);
    });
    for (const streamed of [false, true]) {
      const r = await call(s, streamed);
      expect(r.status).toBe(200);
      expect(r.text).not.toContain('"error"');
      const after = (await s.settled('support-bot')).billedTokens;
      expect(after - before).toBe(42);
      before = after;
    }
    stream(up, (res) => {
      for (const e of content(10)) res.write(e);
    });
    for (const streamed of [false, true]) {
      const r = await call(s, streamed);
      if (streamed) expect(r.text).toContain('upstream_timeout');
      else expect(r.status).toBe(504);
      const after = (await s.settled('support-bot')).billedTokens;
      expect(after - before).toBeGreaterThan(10);
      before = after;
    }
  } finally {
    await up.stop();
  }
});

test('an error chunk mid-stream, then [DONE]: the client is told the call failed (not a 200 with half a reply), billed what streamed', async ({
  stack,
}) => {
  const { s, up } = await scriptedStack(stack);
  const error = {
    message: 'The server had an error while processing your request.',
    type: 'server_error',
    param: null,
    code: null,
  };
  try {
    stream(up, (res) => {
      for (const e of content(10)) res.write(e);
      res.write(`data: ${JSON.stringify({ error })}\n\n`);
      res.end(DONE);
    });
    let before = (await s.settled('support-bot')).billedTokens;
    for (const streamed of [false, true]) {
      const r = await call(s, streamed);
      if (streamed) {
        expect(r.status).toBe(200);
        // The provider's error chunk, told once (the edge adds none of its own, as for
        // Messages), and the stream is not ended as a finished one.
        expect(r.text).toContain('server_error');
        expect(r.text.split('"error"').length - 1).toBe(1);
        expect(r.text).not.toContain(DONE);
      } else {
        expect(r.status).toBe(502);
        expect(JSON.parse(r.text)).toMatchObject({ error: { code: 'upstream_error' } });
      }
      const after = (await s.settled('support-bot')).billedTokens;
      // Billed the prompt and the 10 tokens streamed (the edge's count: no usage came).
      expect(after - before).toBeGreaterThan(10);
      before = after;
    }
    const events = await s.events(
      (e) => e.filter((x) => x.type === 'reservation.settled').length >= 2,
    );
    const settled = events.filter((e) => e.type === 'reservation.settled').slice(-2);
    for (const e of settled) expect(e).toMatchObject({ outcome: 'upstream_error' });
  } finally {
    await up.stop();
  }
});

test('more choices than asked (indexes past n): all are counted against the one output limit, and the bill is the provider usage, or the edge count of every choice', async ({
  stack,
}) => {
  const { s, up } = await scriptedStack(stack);
  try {
    const choices = [0, 1, 5, 9];
    let before = (await s.settled('support-bot')).billedTokens;
    stream(up, (res) => {
      for (const i of choices) for (const e of content(5, i)) res.write(e);
      for (const i of choices) res.write(finish(i));
      res.end(usage(USAGE) + DONE);
    });
    for (const streamed of [false, true]) {
      const r = await call(s, streamed, { n: 2 });
      expect(r.status).toBe(200);
      const after = (await s.settled('support-bot')).billedTokens;
      expect(after - before).toBe(42);
      before = after;
    }
    // No usage: the edge's count of all 20 tokens, whatever index they came under.
    stream(up, (res) => {
      for (const i of choices) for (const e of content(5, i)) res.write(e);
      for (const i of choices) res.write(finish(i));
      res.end(DONE);
    });
    const r = await call(s, false, { n: 2 });
    expect(r.status).toBe(200);
    expect((await s.settled('support-bot')).billedTokens - before).toBeGreaterThanOrEqual(20 + 20);
    // Past the output limit (100 in all), the call is cut whatever the indexes.
    stream(up, (res) => {
      for (let k = 0; k < 40; k++)
        for (const i of choices) for (const e of content(1, i)) res.write(e);
      res.end(DONE);
    });
    const cut = await call(s, false, { n: 2 });
    expect(cut.status).toBe(200);
    const body = JSON.parse(cut.text) as { choices: { finish_reason: string }[] };
    expect(body.choices.every((c) => c.finish_reason === 'length')).toBe(true);
    const u = await s.settled('support-bot');
    expect(u.windows.every((w) => w.held === 0)).toBe(true);
  } finally {
    await up.stop();
  }
});

test('usage parts past their totals (cached and audio input past the prompt, reasoning and audio output past the completion) are billed within them, never negative', async ({
  stack,
}) => {
  const { s, up } = await scriptedStack(stack);
  try {
    const odd = {
      ...USAGE,
      prompt_tokens_details: { cached_tokens: 99, audio_tokens: 25 },
      completion_tokens_details: { reasoning_tokens: 99, audio_tokens: 1e9 },
    };
    stream(up, (res) => {
      for (const e of [...content(10), finish(), usage(odd)]) res.write(e);
      res.end(DONE);
    });
    const before = (await s.settled('support-bot')).billedTokens;
    const r = await call(s, false);
    expect(r.status).toBe(200);
    expect((await s.settled('support-bot')).billedTokens - before).toBe(42);
    const events = await s.events((e) => e.some((x) => x.type === 'reservation.settled'));
    const settled = events.filter((e) => e.type === 'reservation.settled').at(-1)!;
    expect(settled).toMatchObject({ promptTokens: 30, completionTokens: 12, billedTokens: 42 });
    const parts = settled as unknown as Record<string, number>;
    expect(parts.cachedPromptTokens! + parts.audioPromptTokens!).toBeLessThanOrEqual(30);
    expect(parts.reasoningTokens).toBeLessThanOrEqual(12);
    expect(parts.audioCompletionTokens).toBeLessThanOrEqual(12);
    expect(parts.costMicroUsd).toBeGreaterThan(0);
  } finally {
    await up.stop();
  }
});

test('a usage chunk before any content, then the stream ends without a finish_reason or [DONE]: not a completed call; failed, billed at least what streamed', async ({
  stack,
}) => {
  const { s, up } = await scriptedStack(stack);
  try {
    // A provider reporting as it goes (vLLM's continuous_usage_stats): its first usage has no
    // output yet; the stream then stops with a clean close, never finishing.
    const early = { prompt_tokens: 30, completion_tokens: 0, total_tokens: 30 };
    stream(up, (res) => {
      for (const e of [usage(early), ...content(10)]) res.write(e);
      res.end();
    });
    let before = (await s.settled('support-bot')).billedTokens;
    for (const streamed of [false, true]) {
      const r = await call(s, streamed);
      if (streamed) {
        expect(r.status).toBe(200);
        expect(r.text.match(/"error"/g)).toHaveLength(1);
        expect(r.text).not.toContain(DONE);
      } else {
        expect(r.status).toBe(502);
      }
      const after = (await s.settled('support-bot')).billedTokens;
      // The provider's prompt, and the 10 tokens that streamed after its usage.
      expect(after - before).toBeGreaterThanOrEqual(40);
      before = after;
    }
    const events = await s.events(
      (e) => e.filter((x) => x.type === 'reservation.settled').length === 2,
    );
    const settled = events.filter((e) => e.type === 'reservation.settled');
    expect(settled.map((e) => e.outcome)).toEqual(['upstream_error', 'upstream_error']);
  } finally {
    await up.stop();
  }
});

test('the client leaves while the upstream counts the reply before a cut: what the edge had read behind the count is billed', async ({
  stack,
}) => {
  // gpt-4o-mini counted by its upstream (llama-server's /tokenize, one token a word here): the
  // edge's o200k cut counter, which counts the long word below as several tokens, asks the
  // upstream before it cuts, and the stream waits for that count.
  const { s, up } = await scriptedStack(stack, 'default', (c) => {
    entry(c.models, 'gpt-4o-mini').tokenizer = 'upstream';
  });
  try {
    const WORDS = 30;
    const word = ' incomprehensibilities';
    const reply = Array.from({ length: WORDS }, () =>
      chunk({ choices: [{ index: 0, delta: { content: word }, finish_reason: null }] }),
    ).join('');
    let modelClosed: Promise<void> | undefined;
    let heldCount: (() => void) | undefined;
    up.next((res, body, path) => {
      if (path.endsWith('/tokenize')) {
        const answer = () => {
          const n = (typeof body.content === 'string' ? body.content : '')
            .split(/\s+/)
            .filter(Boolean).length;
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ tokens: Array.from({ length: n }, (_, i) => i) }));
        };
        // The count before the cut (the first once the reply began) waits for the test.
        if (modelClosed && !heldCount) heldCount = answer;
        else answer();
        return;
      }
      if (!path.endsWith('/chat/completions')) {
        res.writeHead(404).end();
        return;
      }
      modelClosed = new Promise((resolve) => res.once('close', () => resolve()));
      // The whole reply in one write, then the model stalls: every word reaches the edge in
      // one read, and the provider bills all 30 of them.
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(reply);
    });
    const { aborter, prompt, received } = await streamUntil(s, {}, 'incomprehensibilities');
    await waitFor(() => heldCount !== undefined, { what: 'the count before the cut' });
    const got = received.split('incomprehensibilities').length - 1;
    expect(got).toBeGreaterThan(0);
    expect(got).toBeLessThan(WORDS);
    // The client leaves while the count is pending; the count answers once the edge hung up.
    aborter.abort();
    await modelClosed;
    heldCount!();
    const usage = await s.settled('support-bot');
    expect(usage.inFlight).toBe(0);
    expect(usage.billedTokens).toBe(prompt + WORDS);
  } finally {
    await up.stop();
  }
});

/**
 * support-bot in adaptive mode, on a Redis of the test's own that the authority waits 10 s for:
 * after three calls of 50 output tokens its hold covers 50, and the first output asks the
 * authority to grow it. With Redis paused that extension waits, and so does the stream, 16
 * tokens before the cover ends.
 */
async function heldByExtension(stack: (o: object) => Promise<Stack>) {
  const redis = await startOwnRedis();
  const { s, up } = await scriptedStack(
    stack,
    'default',
    (c) => {
      const t = entry(c.tenants, 'support-bot');
      t.mode = 'adaptive';
      t.adaptive = { percentile: 0.95, minSamples: 3, samples: 20 };
      t.budgets = [{ window: 'month', limit: 1_000_000, unit: 'tokens' }];
    },
    { redisUrl: redis.url, redisTimeoutMs: 10_000 },
  );
  const learned = usage({ prompt_tokens: 30, completion_tokens: 50, total_tokens: 80 });
  stream(up, (res) => res.end([...content(50), finish(), learned, DONE].join('')));
  for (let i = 0; i < 3; i++) expect((await call(s, true)).status).toBe(200);
  const before = await s.settled('support-bot');
  return { s, up, redis, before };
}

/**
 * A streamed call whose extension waits (Redis paused for 3 s when the model is called): the
 * model writes `first` tokens in one write, then `later` once the edge is waiting; the client
 * leaves once it has some of them. Returns the prompt, what the client got, and the model's
 * connection's close.
 */
async function leaveDuringExtension(
  s: Stack,
  up: { next: Parameters<typeof stream>[0]['next'] },
  redis: { pause: (ms: number) => Promise<unknown> },
  first: number,
  later: number,
) {
  let modelClosed: Promise<void> | undefined;
  stream(up, (res) => {
    modelClosed = new Promise((resolve) => res.once('close', () => resolve()));
    void redis.pause(3_000).then(() => {
      res.write(content(first).join(''));
      if (later > 0) setTimeout(() => res.write(content(later).join('')), 200);
    });
  });
  const { aborter, prompt, received } = await streamUntil(s, { max_tokens: 1_000 }, ' budget');
  // Later tokens reach the edge's socket while it waits (and does not read).
  if (later > 0) await new Promise((r) => setTimeout(r, 500));
  aborter.abort();
  await modelClosed;
  return { prompt, got: received.split(' budget').length - 1 };
}

test('the client leaves while a hold extension holds the stream: every event the edge read behind it is billed', async ({
  stack,
}) => {
  const { s, up, redis, before } = await heldByExtension(stack);
  try {
    const { prompt, got } = await leaveDuringExtension(s, up, redis, 400, 0);
    expect(got).toBeGreaterThan(0);
    expect(got).toBeLessThan(400);
    const u = await s.settled('support-bot');
    expect(u.inFlight).toBe(0);
    expect(u.windows[0]!.held).toBe(0);
    expect(u.billedTokens - before.billedTokens).toBe(prompt + 400);
  } finally {
    await up.stop();
    await redis.stop();
  }
});

test('the upstream is not read while a hold extension holds the stream, and the client leaves: billed at least the prompt and what the edge read, the hold closed once', async ({
  stack,
}) => {
  const { s, up, redis, before } = await heldByExtension(stack);
  try {
    const { prompt } = await leaveDuringExtension(s, up, redis, 400, 300);
    const u = await s.settled('support-bot');
    expect(u.inFlight).toBe(0);
    expect(u.windows[0]!.held).toBe(0);
    const billed = u.billedTokens - before.billedTokens;
    expect(billed).toBeGreaterThanOrEqual(prompt + 400);
    expect(billed).toBeLessThanOrEqual(prompt + 700);
    const all = await s.events(
      (e) => e.filter((x) => x.type === 'reservation.settled').length >= 4,
    );
    const created = all.filter((e) => e.type === 'reservation.created');
    const last = created[created.length - 1] as { reservationId: string };
    const closing = all.filter(
      (e) =>
        'reservationId' in e &&
        e.reservationId === last.reservationId &&
        (e.type === 'reservation.settled' || e.type === 'reservation.released'),
    );
    expect(closing.map((e) => e.type)).toEqual(['reservation.settled']);
  } finally {
    await up.stop();
    await redis.stop();
  }
});
