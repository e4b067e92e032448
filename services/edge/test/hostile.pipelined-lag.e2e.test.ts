import { connect } from 'node:net';
import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { chat, edgeTest as test, entry, KEYS, tenantMetric, type Stack } from './harness.js';
import { chunk, content, DONE, finish } from './chat-chunks.js';
import { scriptedStack } from './scripted-upstream.js';

function rawChat(body: string): string {
  return (
    'POST /v1/chat/completions HTTP/1.1\r\nHost: edge\r\n' +
    `Authorization: Bearer ${KEYS.support}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  );
}

async function inFlight(s: Stack): Promise<number> {
  const text = (await s.edge.app.inject({ method: 'GET', url: '/metrics' })).body;
  return Number(/^edge_calls_in_flight(?:\{[^}]*\})? (\S+)$/m.exec(text)?.[1]);
}

/**
 * A pipelined streaming call waiting behind a long one (a client that reads everything): its
 * reply waits on the edge, and past EDGE_STREAM_LAG_BYTES the edge "closes" it. Its response
 * has no socket yet, so ServerResponse.destroy() only arms a destroy for when it gets one:
 * nothing closes, the call goes on, and every byte its upstream writes is kept, far past the
 * lag the edge allows a stream.
 */
test('a pipelined stream further behind than EDGE_STREAM_LAG_BYTES is ended, not kept reading', async ({
  stack,
}) => {
  const s = await stack({
    behaviour: { tokenDelayMs: 1, completion: { mode: 'fixed', tokens: 200_000 } },
    patch: (c) => {
      const team = entry(c.tenants, 'support-bot');
      team.budgets = [{ window: 'month', limit: 10_000_000, unit: 'tokens' }];
      (team.useCases as Array<{ maxTokens: number }>)[0]!.maxTokens = 200_000;
    },
    edge: { options: { streamLagBytes: 64 * 1024 } },
  });
  const url = new URL(s.edge.url);
  // First: a non-streaming call of ~15 s; then, pipelined, a long stream.
  const first = JSON.stringify({ ...chat(5), max_tokens: 15_000 });
  const second = JSON.stringify({ ...chat(5), max_tokens: 200_000, stream: true });
  const socket = connect(Number(url.port), url.hostname, () =>
    socket.write(rawChat(first) + rawChat(second)),
  );
  socket.on('data', () => undefined);
  socket.on('error', () => undefined);
  try {
    await waitFor(
      async () =>
        (await tenantMetric(s, 'edge_slow_clients_total', 'support-bot')) === 1 || undefined,
      { what: 'the edge to find the pipelined stream too slow', timeoutMs: 20_000 },
    );
    // Within 2 s of being "closed" the second call has ended: only the first is in flight.
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await inFlight(s)).toBe(1);
  } finally {
    socket.destroy();
  }
});

/**
 * A rightful pipelined client: it reads everything, and its second (streamed) reply waits on the
 * edge only while the first is answered, all of it (~60 KB) under EDGE_STREAM_LAG_BYTES (64
 * KiB). Before, the edge counted what waited as its PassThrough's writable and readable sides
 * plus the response's buffer, and a chunk the stream had taken in while its readable side was
 * past 16 KiB is in both (node holds the write's callback until the reader reads): 80 KB
 * counted for 60 KB, and the client was closed as too slow, its reply cut.
 */
test('a pipelined stream that waits within EDGE_STREAM_LAG_BYTES is served in full: a chunk counts once in what waits', async ({
  stack,
}) => {
  const { s, up } = await scriptedStack(stack, 'default', undefined, {
    edge: { options: { streamLagBytes: 64 * 1024 } },
  });
  const pad = (n: number) =>
    chunk({ choices: [{ index: 0, delta: {}, finish_reason: null }], pad: 'x'.repeat(n) });
  let streamed!: () => void;
  const streamWritten = new Promise<void>((r) => (streamed = r));
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
  up.next((res, body) => {
    if (body.stream !== true) {
      // The first call is answered once the second's stream has been written whole.
      void streamWritten.then(async () => {
        await pause(500);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            id: 'chatcmpl-1',
            object: 'chat.completion',
            created: 1,
            model: 'gpt-4o-mini',
            choices: [
              { index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' },
            ],
            usage: { prompt_tokens: 10, completion_tokens: 1, total_tokens: 11 },
          }),
        );
      });
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    void (async () => {
      // Three reads of ~20 KB each, a second apart (not one read on a loaded box).
      res.write(content(1).join('') + pad(20_000));
      await pause(1_000);
      res.write(pad(20_000));
      await pause(1_000);
      res.write(pad(20_000));
      await pause(1_000);
      res.end(finish() + DONE);
      streamed();
    })();
  });
  const url = new URL(s.edge.url);
  const first = JSON.stringify({ ...chat(5), max_tokens: 20 });
  const second = JSON.stringify({ ...chat(5), max_tokens: 20, stream: true });
  const received: Buffer[] = [];
  const socket = connect(Number(url.port), url.hostname, () =>
    socket.write(rawChat(first) + rawChat(second)),
  );
  socket.on('data', (b: Buffer) => received.push(b));
  socket.on('error', () => undefined);
  try {
    const text = () => Buffer.concat(received).toString();
    await waitFor(
      async () =>
        text().includes('[DONE]') ||
        (await tenantMetric(s, 'edge_slow_clients_total', 'support-bot')) > 0 ||
        undefined,
      { what: 'the pipelined stream to end, or be closed as too slow', timeoutMs: 20_000 },
    );
    expect(await tenantMetric(s, 'edge_slow_clients_total', 'support-bot')).toBe(0);
    await waitFor(() => text().includes('[DONE]') || undefined, {
      what: 'the pipelined stream to end',
      timeoutMs: 10_000,
    });
    expect(text().match(/"pad"/g)).toHaveLength(3);
  } finally {
    socket.destroy();
    await up.stop();
  }
});
