import type { ServerResponse } from 'node:http';
import { expect } from 'vitest';
import { edgeTest as test, KEYS, type Stack } from './harness.js';
import { responsesEvent as ev, scriptedStack, type ScriptedUpstream } from './scripted-upstream.js';
import { CLAUDE, post, withClaude, words } from './surfaces.js';

/**
 * Red team, Messages streams as no provider means to write them (found by an audit of the
 * Messages surface), from an upstream the test scripts event by event.
 */

/** The prompt count_tokens answers for every call. */
const PROMPT = 30;

/** The word the scripted model writes: one token, and none of the prompt's. */
const WORD = ' zebra';

/**
 * Answers count_tokens with PROMPT and a token for each WORD (the edge counts a reply it has no
 * usage of as the count of its text less that of '.'), every message call with `stream`.
 */
function script(up: ScriptedUpstream, stream: (res: ServerResponse) => void): void {
  up.next((res, body, path) => {
    if (path.endsWith('/count_tokens')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      const words = JSON.stringify(body).split(WORD.trim()).length - 1;
      res.end(JSON.stringify({ input_tokens: PROMPT + words }));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    stream(res);
  });
}

const start = (usage: object = { input_tokens: PROMPT, output_tokens: 1 }) =>
  ev('message_start', {
    message: {
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      model: CLAUDE,
      content: [],
      stop_reason: null,
      usage,
    },
  });
const text = (n: number) => [
  ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
  ...Array.from({ length: n }, () =>
    ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: WORD } }),
  ),
  ev('content_block_stop', { index: 0 }),
];

const ask = (extra: object = {}) => ({
  model: CLAUDE,
  max_tokens: 100,
  messages: [{ role: 'user', content: words(20) }],
  ...extra,
});
const headersOf = (key: string) => ({ 'x-api-key': key, 'anthropic-version': '2023-06-01' });

async function call(s: Stack, stream: boolean): Promise<{ status: number; text: string }> {
  const res = await fetch(`${s.edge.url}/v1/messages`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-api-key': KEYS.support,
      'anthropic-version': '2023-06-01',
    },
    body: JSON.stringify({
      model: CLAUDE,
      max_tokens: 100,
      messages: [{ role: 'user', content: words(20) }],
      stream,
    }),
  });
  return { status: res.status, text: await res.text() };
}

test('the connection lost after message_delta and its usage, before message_stop: the client gets the message it was billed for, not a 502', async ({
  stack,
}) => {
  const { s, up } = await scriptedStack(stack, 'claude', withClaude);
  try {
    script(up, (res) => {
      for (const e of [start(), ...text(10)]) res.write(e);
      res.write(
        ev('message_delta', {
          delta: { stop_reason: 'end_turn', stop_sequence: null },
          usage: { output_tokens: 10 },
        }),
      );
      // The last event with content went out; the connection is then reset, not ended.
      setTimeout(() => res.destroy(), 50);
    });
    let before = (await s.settled('support-bot')).billedTokens;
    for (const stream of [false, true]) {
      const r = await call(s, stream);
      expect(r.status).toBe(200);
      if (stream) {
        expect(r.text).toContain('event: message_delta');
        // The stream is closed as Anthropic closes one, once.
        expect(r.text.match(/event: message_stop/g)).toHaveLength(1);
        expect(r.text).not.toContain('event: error');
      } else {
        expect(JSON.parse(r.text)).toMatchObject({
          stop_reason: 'end_turn',
          usage: { input_tokens: PROMPT, output_tokens: 10 },
        });
      }
      // Billed once, as the provider reported.
      const usage = await s.settled('support-bot');
      expect(usage.billedTokens - before).toBe(PROMPT + 10);
      before = usage.billedTokens;
    }
  } finally {
    await up.stop();
  }
});

test("a tenant naming another tenant's code execution container is answered as for an unknown container: nothing counted, held or sent; the owner reuses it", async ({
  stack,
  redis,
  iso,
}) => {
  const { s, up } = await scriptedStack(stack, 'claude', withClaude);
  const container = {
    id: 'container_011CPR5CNjB747bTd36fQLFk',
    expires_at: '2026-12-06T12:00:00Z',
  };
  let calls = 0;
  let counts = 0;
  try {
    up.next((res, _body, path) => {
      res.writeHead(200, {
        'content-type': path.endsWith('/count_tokens') ? 'application/json' : 'text/event-stream',
      });
      if (path.endsWith('/count_tokens')) counts += 1;
      if (path.endsWith('/count_tokens'))
        return void res.end(JSON.stringify({ input_tokens: PROMPT }));
      calls += 1;
      for (const e of [start(), ...text(3)]) res.write(e);
      res.write(
        ev('message_delta', {
          delta: { stop_reason: 'end_turn', stop_sequence: null, container },
          usage: { output_tokens: 3 },
        }),
      );
      res.end(ev('message_stop', {}));
    });
    // support-bot's call ran code in a container (the provider keeps its files).
    const first = await post(s, '/v1/messages', ask(), headersOf(KEYS.support));
    expect(first.status).toBe(200);
    await s.settled('support-bot');
    expect(await redis.get(`${iso.keyPrefix}:{support-bot}:ro:${container.id}`)).toBe(
      'support-bot',
    );

    const before = { calls, counts, held: (await s.settled('batch-summariser')).billedTokens };
    for (const named of [container.id, { id: container.id }]) {
      const stolen = await post(
        s,
        '/v1/messages',
        ask({ container: named }),
        headersOf(KEYS.batch),
      );
      expect(stolen.status).toBe(400);
      expect(stolen.body).toMatchObject({
        type: 'error',
        error: {
          type: 'invalid_request_error',
          message: expect.stringContaining(`Container with id '${container.id}' not found`),
        },
      });
    }
    // The same answer as for a container nobody made.
    for (const unknown of ['container_0123456789abcdef', 'container_a b']) {
      const none = await post(
        s,
        '/v1/messages',
        ask({ container: unknown }),
        headersOf(KEYS.batch),
      );
      expect(none.status).toBe(400);
      expect(JSON.stringify(none.body)).toContain(`Container with id '${unknown}' not found`);
    }
    expect(calls).toBe(before.calls);
    expect(counts).toBe(before.counts);
    expect((await s.settled('batch-summariser')).billedTokens).toBe(before.held);

    // Its owner reuses it, at once.
    const again = await post(
      s,
      '/v1/messages',
      ask({ container: container.id }),
      headersOf(KEYS.support),
    );
    expect(again.status).toBe(200);
    expect(calls).toBe(before.calls + 1);
  } finally {
    await up.stop();
  }
});

test("a message_delta that reports no output count (usage null or left out) is billed the output the edge counted, not message_start's placeholder", async ({
  stack,
}) => {
  const { s, up } = await scriptedStack(stack, 'claude', withClaude);
  try {
    let before = (await s.settled('support-bot')).billedTokens;
    for (const usage of [{ output_tokens: null }, undefined]) {
      script(up, (res) => {
        // message_start's output_tokens is Anthropic's placeholder (1), not the reply's count.
        for (const e of [start(), ...text(40)]) res.write(e);
        const delta = { stop_reason: 'end_turn', stop_sequence: null };
        res.write(ev('message_delta', usage ? { delta, usage } : { delta }));
        res.end(ev('message_stop', {}));
      });
      for (const stream of [false, true]) {
        const r = await call(s, stream);
        expect(r.status).toBe(200);
        // The prompt message_start reported, and the 40 words written (41: the edge's count
        // of a reply adds the token of the '.' it is counted against), never 1.
        const billed = (await s.settled('support-bot')).billedTokens - before;
        expect(billed).toBe(PROMPT + 41);
        before += billed;
      }
    }
  } finally {
    await up.stop();
  }
});

test("an error event before message_start (Anthropic overloaded) bills nothing: the hold is released, the client told the provider's error once", async ({
  stack,
}) => {
  const { s, up } = await scriptedStack(stack, 'claude', withClaude);
  try {
    const overloaded = { type: 'overloaded_error', message: 'Overloaded' };
    script(up, (res) => res.end(ev('error', { error: overloaded })));
    const before = await s.settled('support-bot');
    const nonStreaming = await call(s, false);
    expect(nonStreaming.status).toBe(502);
    expect(JSON.parse(nonStreaming.text)).toMatchObject({
      error: { message: expect.stringContaining('(529)') },
    });
    const streaming = await call(s, true);
    expect(streaming.status).toBe(200);
    expect(streaming.text.match(/event: error/g)).toHaveLength(1);
    expect(streaming.text).toContain('overloaded_error');
    const after = await s.settled('support-bot');
    expect(after.billedTokens).toBe(before.billedTokens);
    expect(after.windows.every((w) => w.held === 0)).toBe(true);

    // After message_start the provider has read the prompt: billed, and still told once.
    script(up, (res) => {
      for (const e of [start(), ...text(5)]) res.write(e);
      res.end(ev('error', { error: overloaded }));
    });
    const mid = await call(s, true);
    expect(mid.text.match(/event: error/g)).toHaveLength(1);
    expect((await s.settled('support-bot')).billedTokens - after.billedTokens).toBe(PROMPT + 6);
  } finally {
    await up.stop();
  }
});
