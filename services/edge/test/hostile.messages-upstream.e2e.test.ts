import type { ServerResponse } from 'node:http';
import { expect } from 'vitest';
import { edgeTest as test, KEYS, type Stack } from './harness.js';
import { responsesEvent as ev, scriptedStack, type ScriptedUpstream } from './scripted-upstream.js';
import { CLAUDE, withClaude, words } from './surfaces.js';

/**
 * Red team, Messages streams as no provider means to write them (found by an audit of the
 * Messages surface), from an upstream the test scripts event by event.
 */

/** The prompt count_tokens answers for every call. */
const PROMPT = 30;

/** Answers count_tokens with PROMPT, and every message call with `stream`. */
function script(up: ScriptedUpstream, stream: (res: ServerResponse) => void): void {
  up.next((res, _body, path) => {
    if (path.endsWith('/count_tokens')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ input_tokens: PROMPT }));
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
    ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: ' budget' } }),
  ),
  ev('content_block_stop', { index: 0 }),
];

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
