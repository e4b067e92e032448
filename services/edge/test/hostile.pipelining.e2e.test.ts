import { connect } from 'node:net';
import { expect } from 'vitest';
import { chat, edgeTest as test, KEYS, openBodyBytes, type Stack } from './harness.js';

/**
 * HTTP/1.1 pipelining: a client may send its next request on a keep-alive socket before the
 * answer to the one before it. Node answers them in order: the later request's response has no
 * socket (`res.socket` is null) until the one before it has finished.
 */

const MiB = 1_048_576;

/** A chat request as raw HTTP/1.1, with its length or chunked. */
function rawChat(key: string, body: string, framing: 'length' | 'chunked' = 'length'): string {
  const head =
    'POST /v1/chat/completions HTTP/1.1\r\nHost: edge\r\n' +
    `Authorization: Bearer ${key}\r\nContent-Type: application/json\r\n`;
  const length = Buffer.byteLength(body);
  return framing === 'length'
    ? `${head}Content-Length: ${length}\r\n\r\n${body}`
    : `${head}Transfer-Encoding: chunked\r\n\r\n${length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
}

/**
 * Writes `requests` on one socket at once. Resolves with what came back once `answers`
 * responses have, or the socket closed, or `closeAfterMs` passed (the socket is then closed).
 */
function pipeline(
  s: Stack,
  requests: string[],
  opts: { answers: number; closeAfterMs: number },
): Promise<{ statuses: string[]; closedByUs: boolean }> {
  const url = new URL(s.edge.url);
  return new Promise((resolve) => {
    let text = '';
    let closedByUs = false;
    const statuses = () => [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]!);
    const done = () => resolve({ statuses: statuses(), closedByUs });
    const socket = connect(Number(url.port), url.hostname, () => socket.write(requests.join('')));
    const timer = setTimeout(() => {
      closedByUs = true;
      socket.destroy();
    }, opts.closeAfterMs);
    socket.on('data', (b) => {
      text += b.toString();
      if (statuses().length >= opts.answers && /\}\s*$/.test(text)) {
        clearTimeout(timer);
        socket.destroy();
      }
    });
    socket.on('close', () => {
      clearTimeout(timer);
      done();
    });
    socket.on('error', () => undefined);
  });
}

test('a pipelined request is answered in its turn, not dropped with its socket left hanging', async ({
  stack,
}) => {
  const s = await stack({
    behaviour: { tokenDelayMs: 5, completion: { mode: 'fixed', tokens: 20 } },
  });
  const body = JSON.stringify({ ...chat(5), max_tokens: 20 });
  const got = await pipeline(s, [rawChat(KEYS.support, body), rawChat(KEYS.support, body)], {
    answers: 2,
    closeAfterMs: 5_000,
  });
  expect(got).toEqual({ statuses: ['200', '200'], closedByUs: false });
  expect(s.upstream.stats().recent).toHaveLength(2);
  const u = await s.settled('support-bot');
  expect(u.windows[0]!.used).toBe(2 * (12 + 20));
});

test("a client that leaves while its pipelined request waits for its turn leaves nothing open: not its body's bytes, not its hold, and every tenant's calls still fit", async ({
  stack,
}) => {
  const s = await stack({
    // The first call of each socket takes about 2 s: the pipelined one waits behind it.
    behaviour: { tokenDelayMs: 20, completion: { mode: 'fixed', tokens: 100 } },
    edge: {
      options: {
        bodyLimitBytes: 10 * MiB,
        openBodies: { tenantBodyBytes: 25 * MiB, bodyBytes: 35 * MiB },
      },
    },
  });
  const body = JSON.stringify({ ...chat(5), max_tokens: 100 });
  // Two teams each pipeline a chunked call (taken at the body limit, 10 MiB, until its
  // response closes) behind a slow one, and hang up while it waits.
  for (const key of [KEYS.support, KEYS.support, KEYS.batch]) {
    const got = await pipeline(s, [rawChat(key, body), rawChat(key, body, 'chunked')], {
      answers: 2,
      closeAfterMs: 700,
    });
    expect(got.closedByUs).toBe(true);
  }
  await s.settled('support-bot');
  await s.settled('batch-summariser');
  // A team that never pipelined can still send a 10 MiB body's worth (chunked): the bodies of
  // the sockets that closed are not counted against every tenant's bound.
  const other = await pipeline(s, [rawChat(KEYS.multi, body, 'chunked')], {
    answers: 1,
    closeAfterMs: 10_000,
  });
  expect(other.statuses).toEqual(['200']);
  // Every socket is closed: no body is open on the edge.
  expect(await openBodyBytes(s)).toBe(0);
});
