import type { ServerResponse } from 'node:http';
import { expect } from 'vitest';
import { edgeTest as test, KEYS, type Stack } from './harness.js';
import { responsesEvent as ev, scriptedStack } from './scripted-upstream.js';
import { words } from './surfaces.js';

/**
 * Red team, Responses streams as no provider means to write them (found by an audit of the
 * Responses surface), from an upstream the test scripts event by event.
 */

const response = (extra: object = {}) => ({
  id: 'resp_1',
  object: 'response',
  status: 'in_progress',
  output: [],
  ...extra,
});
const deltas = (n: number) =>
  Array.from({ length: n }, () =>
    ev('response.output_text.delta', { output_index: 0, content_index: 0, delta: ' budget' }),
  );
const USAGE = { input_tokens: 30, output_tokens: 10 };

async function call(s: Stack, stream: boolean): Promise<{ status: number; text: string }> {
  const res = await fetch(`${s.edge.url}/v1/responses`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEYS.support}` },
    body: JSON.stringify({
      model: 'gpt-4o-mini',
      input: words(20),
      max_output_tokens: 100,
      stream,
    }),
  });
  return { status: res.status, text: await res.text() };
}

test('the connection lost after response.completed: the client gets the response it was billed for, not a 502', async ({
  stack,
}) => {
  const { s, up } = await scriptedStack(stack);
  try {
    up.next((res: ServerResponse) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const e of [ev('response.created', { response: response() }), ...deltas(10)]) {
        res.write(e);
      }
      const done = response({ status: 'completed', usage: USAGE });
      res.write(ev('response.completed', { response: done }));
      // The terminal event went out; the connection is then reset, not ended.
      setTimeout(() => res.destroy(), 50);
    });
    let before = (await s.settled('support-bot')).billedTokens;
    for (const stream of [false, true]) {
      const r = await call(s, stream);
      expect(r.status).toBe(200);
      if (stream) {
        expect(r.text).toContain('event: response.completed');
        expect(r.text).not.toContain('event: error');
      } else {
        expect(JSON.parse(r.text)).toMatchObject({ status: 'completed', usage: USAGE });
      }
      // Billed once, as the provider reported.
      const usage = await s.settled('support-bot');
      expect(usage.billedTokens - before).toBe(40);
      before = usage.billedTokens;
    }
  } finally {
    await up.stop();
  }
});

test('a second terminal event without usage does not wipe out the usage of the first', async ({
  stack,
}) => {
  const { s, up } = await scriptedStack(stack);
  try {
    // 90 output tokens reported, 10 streamed: the provider's word is the bill.
    const reported = { input_tokens: 30, output_tokens: 90 };
    up.next((res: ServerResponse) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const e of [ev('response.created', { response: response() }), ...deltas(10)]) {
        res.write(e);
      }
      res.write(
        ev('response.completed', { response: response({ status: 'completed', usage: reported }) }),
      );
      res.end(
        ev('response.completed', { response: response({ status: 'completed', usage: null }) }),
      );
    });
    let before = (await s.settled('support-bot')).billedTokens;
    for (const stream of [false, true]) {
      const r = await call(s, stream);
      expect(r.status).toBe(200);
      if (!stream) expect(JSON.parse(r.text)).toMatchObject({ usage: reported });
      const usage = await s.settled('support-bot');
      expect(usage.billedTokens - before).toBe(120);
      before = usage.billedTokens;
    }
  } finally {
    await up.stop();
  }
});
