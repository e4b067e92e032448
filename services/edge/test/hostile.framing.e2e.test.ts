import { connect } from 'node:net';
import { expect } from 'vitest';
import { chat, edgeTest as test, KEYS, type Stack } from './harness.js';

/**
 * Requests framed to be read two ways (request smuggling: Transfer-Encoding beside
 * Content-Length, two lengths, an obfuscated Transfer-Encoding) and heads past node's bounds
 * (header bytes, header count), each carrying a valid key and a call the edge would serve: each
 * is a clear 4xx with its connection closed, and neither it nor a request smuggled in its body
 * is admitted, held or sent upstream.
 */

/**
 * Writes `raw` on a fresh socket; resolves with everything the edge answered until it closed
 * (or until 2 s after its last answer: time for a smuggled request's answer to follow).
 */
function exchange(s: Stack, raw: string): Promise<string> {
  const url = new URL(s.edge.url);
  return new Promise((resolve) => {
    let text = '';
    const socket = connect(Number(url.port), url.hostname, () => socket.write(raw));
    let timer = setTimeout(() => socket.destroy(), 10_000);
    socket.on('data', (b) => {
      text += b.toString();
      clearTimeout(timer);
      timer = setTimeout(() => socket.destroy(), 2_000);
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(text);
    });
  });
}

const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]);

const body = JSON.stringify({ ...chat(5), max_tokens: 5 });
const head = (extra: string) =>
  'POST /v1/chat/completions HTTP/1.1\r\nHost: edge\r\n' +
  `Authorization: Bearer ${KEYS.support}\r\nContent-Type: application/json\r\n${extra}`;
/** A whole request, to be smuggled inside another's body. */
const smuggled = `${head(`Content-Length: ${body.length}\r\n`)}\r\n${body}`;
const chunk = (s: string) => `${s.length.toString(16)}\r\n${s}\r\n`;

const CASES: Array<[string, string, string]> = [
  [
    'Transfer-Encoding and Content-Length',
    head(`Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n`) +
      `${chunk(body)}0\r\n\r\n${smuggled}`,
    '400',
  ],
  [
    'Content-Length and Transfer-Encoding',
    head(`Transfer-Encoding: chunked\r\nContent-Length: ${body.length + 7}\r\n\r\n`) +
      `${chunk(body)}0\r\n\r\n${smuggled}`,
    '400',
  ],
  [
    'two different Content-Lengths',
    head(`Content-Length: ${body.length}\r\nContent-Length: 3\r\n\r\n`) + body + smuggled,
    '400',
  ],
  [
    'an obfuscated Transfer-Encoding',
    head(`Transfer-Encoding: xchunked\r\n\r\n`) + `${chunk(body)}0\r\n\r\n${smuggled}`,
    '400',
  ],
  [
    'a space before the colon',
    head(`Transfer-Encoding : chunked\r\n\r\n`) + `${chunk(body)}0\r\n\r\n${smuggled}`,
    '400',
  ],
  ['a bare LF line ending in the head', head(`Content-Length: ${body.length}\n\r\n`) + body, '400'],
  [
    'headers past 16 KiB',
    head(`X-Pad: ${'a'.repeat(20_000)}\r\nContent-Length: ${body.length}\r\n\r\n`) + body,
    '431',
  ],
  [
    '5,000 headers (40 KB of head)',
    head(
      `${Array.from({ length: 5_000 }, (_, i) => `x${i}: y\r\n`).join('')}Content-Length: ${body.length}\r\n\r\n`,
    ) + body,
    '431',
  ],
  [
    // Under 16 KiB: node keeps the first 2,000 headers and drops the rest, the key with them.
    '2,100 headers before the key',
    'POST /v1/chat/completions HTTP/1.1\r\nHost: edge\r\n' +
      Array.from({ length: 2_100 }, () => 'x:y\r\n').join('') +
      `Authorization: Bearer ${KEYS.support}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${body.length}\r\n\r\n${body}`,
    '401',
  ],
];

test('requests framed two ways, or with heads past the bounds, are a clear 4xx: nothing admitted, held or sent', async ({
  stack,
}) => {
  const s = await stack({ behaviour: { completion: { mode: 'fixed', tokens: 5 } } });
  for (const [what, raw, status] of CASES) {
    expect(statuses(await exchange(s, raw)), what).toEqual([status]);
  }
  expect(s.upstream.stats().recent).toHaveLength(0);
  const u = await s.settled('support-bot');
  expect(u.windows[0]!.used).toBe(0);
  expect((await s.events(() => true)).filter((e) => e.type === 'reservation.created')).toEqual([]);
});
