import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect, test } from 'vitest';
import { httpProxy } from './http-proxy.js';

/** A server that answers every request with its own name, the method, path and body it got. */
async function echo(name: string) {
  const server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      res.writeHead(201, { 'x-echo': name, 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          name,
          method: req.method,
          path: req.url,
          header: req.headers['x-test'],
          body: Buffer.concat(chunks).toString(),
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, close: () => new Promise((r) => server.close(r)) };
}

test('each request goes to the target its route picks from it and its body, and the answer comes back whole', async () => {
  const [a, b] = await Promise.all([echo('a'), echo('b')]);
  const proxy = await httpProxy((req, body) => ({
    target: body.toString().includes('"to":"b"') ? b.url : a.url,
    delayMs: req.url?.startsWith('/slow') ? 150 : 0,
  }));
  try {
    const post = (path: string, to: string) =>
      fetch(`${proxy.url}${path}`, {
        method: 'POST',
        headers: { 'x-test': 'kept' },
        body: JSON.stringify({ to }),
      });
    const toB = await post('/v1/x?q=1', 'b');
    expect(toB.status).toBe(201);
    expect(toB.headers.get('x-echo')).toBe('b');
    expect(await toB.json()).toEqual({
      name: 'b',
      method: 'POST',
      path: '/v1/x?q=1',
      header: 'kept',
      body: '{"to":"b"}',
    });
    const started = performance.now();
    const slow = await post('/slow', 'a');
    expect(performance.now() - started).toBeGreaterThanOrEqual(149);
    expect(await slow.json()).toMatchObject({ name: 'a', path: '/slow' });
  } finally {
    await proxy.close();
    await Promise.all([a.close(), b.close()]);
  }
});

test('a target that refuses the connection drops the request, and close() ends open connections', async () => {
  const gone = await echo('gone');
  await gone.close();
  const proxy = await httpProxy(() => ({ target: gone.url }));
  await expect(fetch(proxy.url)).rejects.toThrow();
  // A keep-alive connection left open by a client does not hold close() up.
  const a = await echo('a');
  const proxyA = await httpProxy(() => ({ target: a.url }));
  expect((await fetch(proxyA.url)).status).toBe(201);
  await proxyA.close();
  await proxy.close();
  await a.close();
});
