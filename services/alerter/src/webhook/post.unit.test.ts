import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, expect, test } from 'vitest';
import { postWebhook } from './post.js';
import { signWebhook } from './sign.js';

const SECRET = `whsec_${Buffer.from('holdfast alerter test secret 32b').toString('base64')}`;
const sign = () => signWebhook({ secret: SECRET, id: 'evt-1', body: '{"type":"t"}' });
const closers: Array<() => void> = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

interface Seen {
  headers: IncomingHttpHeaders;
  body: string;
}

/** A loopback receiver: `answer` replies to each request (or leaves it hanging). */
async function receiver(answer: (res: ServerResponse) => void): Promise<{
  url: string;
  seen: Seen[];
}> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      answer(res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  closers.push(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, seen };
}

test('a 2xx is delivered: the receiver gets the signed body with the webhook headers and no others', async () => {
  const r = await receiver((res) => res.writeHead(204).end());
  const result = await postWebhook(r.url, sign, 5_000);
  expect(result).toMatchObject({ ok: true, value: { status: 204, error: null } });
  expect(r.seen).toHaveLength(1);
  const [{ headers, body }] = r.seen as [Seen];
  expect(body).toBe('{"type":"t"}');
  const signed = sign().headers;
  expect(headers).toMatchObject({
    ...signed,
    'webhook-timestamp': expect.any(String) as string,
    'webhook-signature': expect.any(String) as string,
    'content-length': String(Buffer.byteLength(body)),
  });
  // What a browser's fetch adds (accept, accept-language, sec-fetch-mode, accept-encoding) is
  // no part of a webhook.
  expect(Object.keys(headers).sort()).toEqual([
    'connection',
    'content-length',
    'content-type',
    'host',
    'user-agent',
    'webhook-id',
    'webhook-signature',
    'webhook-timestamp',
  ]);
});

test('any other answer is refused with its status, and a redirect is not followed', async () => {
  const failing = await receiver((res) => res.writeHead(500).end('no'));
  expect(await postWebhook(failing.url, sign, 5_000)).toMatchObject({
    ok: false,
    error: { code: 'webhook_refused', status: 500, error: 'HTTP 500' },
  });
  const moved = await receiver((res) => res.writeHead(302, { location: failing.url }).end());
  expect(await postWebhook(moved.url, sign, 5_000)).toMatchObject({
    ok: false,
    error: { code: 'webhook_refused', status: 302, error: 'HTTP 302' },
  });
  expect(failing.seen).toHaveLength(1);
});

test('no answer is unreachable: a refused connection, a timeout, a request that cannot be signed', async () => {
  const gone = await receiver(() => undefined);
  closers.splice(0).forEach((close) => close());
  const refused = await postWebhook(gone.url, sign, 5_000);
  expect(refused).toMatchObject({
    ok: false,
    error: { code: 'webhook_unreachable', status: null },
  });
  expect(!refused.ok && refused.error.error).toMatch(/ECONNREFUSED/);

  const hung = await receiver(() => undefined);
  const timedOut = await postWebhook(hung.url, sign, 200);
  expect(timedOut).toMatchObject({
    ok: false,
    error: { code: 'webhook_unreachable', status: null },
  });
  expect(!timedOut.ok && timedOut.error.error).toMatch(/timeout/i);
  expect(!timedOut.ok && timedOut.error.durationMs).toBeGreaterThanOrEqual(150);

  const unsigned = await postWebhook(
    hung.url,
    () => {
      throw new Error('bad secret');
    },
    5_000,
  );
  expect(unsigned).toMatchObject({
    ok: false,
    error: { code: 'webhook_unreachable', error: 'bad secret' },
  });
});
