import { connect } from 'node:net';
import { expect } from 'vitest';
import { chat, edgeTest as test, KEYS, UNREAD_AT_HANGUP, type Stack } from './harness.js';

/**
 * Clients that hang up at each point of a call, many at once: with its request half sent,
 * right after sending it (while it is counted and admitted), while the upstream has not
 * answered yet, mid-stream, and once the last content chunk has come (before `[DONE]`). Every
 * hold is closed once, nothing stays held, and the books are what the provider billed, less at
 * most a hangup's unread residual for each call cut while the provider wrote.
 */

type Point = 'half-sent' | 'sent' | 'before-first-token' | 'mid-stream' | 'before-done';
const POINTS: Point[] = ['half-sent', 'sent', 'before-first-token', 'mid-stream', 'before-done'];
const PER_POINT = 16;
const MAX_TOKENS = 60;
let beforeDone = 0;

/** One streaming call on a raw socket, hung up at `point`; resolves once the socket is closed. */
function hangUp(s: Stack, point: Point): Promise<void> {
  const url = new URL(s.edge.url);
  const body = JSON.stringify({ ...chat(5), max_tokens: MAX_TOKENS, stream: true });
  const raw =
    'POST /v1/chat/completions HTTP/1.1\r\nHost: edge\r\n' +
    `Authorization: Bearer ${KEYS.support}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  return new Promise((resolve) => {
    let text = '';
    const socket = connect(Number(url.port), url.hostname, () => {
      if (point === 'half-sent') {
        socket.write(raw.slice(0, raw.length - 10));
        setTimeout(() => socket.destroy(), 20);
        return;
      }
      socket.write(raw);
      if (point === 'sent') socket.destroy();
    });
    socket.on('data', (b) => {
      text += b.toString();
      // The upstream answered (its headers), then waits 400 ms before its first token.
      if (point === 'before-first-token' && text.includes('\r\n\r\n')) socket.destroy();
      const content = text.split('"content":"').length - 1;
      if (point === 'mid-stream' && content >= MAX_TOKENS / 2) socket.destroy();
      // Every content token read: gone before the finish, the usage and [DONE] (which come in
      // one write, a token's delay later), or just after them.
      if (point === 'before-done' && content >= MAX_TOKENS) {
        if (!text.includes('[DONE]')) beforeDone++;
        socket.destroy();
      }
    });
    socket.on('error', () => undefined);
    socket.on('close', () => resolve());
  });
}

test(`${PER_POINT} clients hanging up at each point of a streamed call, at once: every hold closed once, nothing held, books as the provider's`, async ({
  stack,
}) => {
  const s = await stack({
    behaviour: {
      firstTokenLatencyMs: 400,
      // The gap before the finish, the usage and [DONE]: at 20 ms a loaded box (load 20 on 2
      // cores) sometimes delivered the last token with them in one read to all 16 clients.
      tokenDelayMs: 60,
      completion: { mode: 'fixed', tokens: MAX_TOKENS },
    },
  });
  await Promise.all(
    POINTS.flatMap((point) => Array.from({ length: PER_POINT }, () => hangUp(s, point))),
  );
  const u = await s.settled('support-bot');
  const events = await s.events();
  const created = events.filter((e) => e.type === 'reservation.created');
  const closes = events.filter(
    (e) =>
      e.type === 'reservation.settled' ||
      e.type === 'reservation.released' ||
      e.type === 'reservation.expired',
  );
  expect(closes.filter((e) => e.type === 'reservation.expired')).toEqual([]);
  expect(closes.map((e) => e.reservationId).sort()).toEqual(
    created.map((e) => e.reservationId).sort(),
  );
  // Who got as far as the upstream: the provider's calls, and what it billed.
  const calls = s.upstream.stats().recent.length;
  const billed = s.upstream.stats().billed;
  const provider = billed.promptTokens + billed.completionTokens;
  expect(calls).toBeGreaterThanOrEqual(3 * PER_POINT);
  expect(beforeDone).toBeGreaterThan(0);
  expect(u.windows[0]!.used).toBeLessThanOrEqual(provider);
  expect(u.windows[0]!.used).toBeGreaterThanOrEqual(provider - calls * UNREAD_AT_HANGUP);
  expect(u.windows.every((w) => w.held === 0)).toBe(true);
  // The edge is left with nothing open of them, and serves the next call.
  const ok = await s.openai(KEYS.support).chat.completions.create({ ...chat(5), max_tokens: 5 });
  expect(ok.usage?.completion_tokens).toBe(5);
});
