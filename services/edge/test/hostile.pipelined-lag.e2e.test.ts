import { connect } from 'node:net';
import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { chat, edgeTest as test, entry, KEYS, tenantMetric, type Stack } from './harness.js';

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
