import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildBareProxy, type BareProxy } from './app.js';

/** A stand-in for the mock upstream: echoes what it got, as JSON or as two SSE events. */
function upstream(): Server {
  return createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString()) as { stream?: boolean };
      const seen = { path: req.url, accept: req.headers.accept, body };
      if (body.stream) {
        res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
        res.write(`data: ${JSON.stringify(seen)}\n\n`);
        res.end('data: [DONE]\n\n');
      } else {
        res.writeHead(body.stream === false ? 200 : 429, { 'content-type': 'application/json' });
        res.end(JSON.stringify(seen));
      }
    });
  });
}

describe('bare proxy', () => {
  let server: Server;
  let proxy: BareProxy;
  let url: string;

  beforeAll(async () => {
    server = upstream().listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    proxy = await buildBareProxy({ upstreamOrigin: `http://127.0.0.1:${port}` });
    url = await proxy.app.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await proxy.close();
    server.close();
  });

  const post = (body: unknown) =>
    fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  it('forwards a plain chat completion and answers with the upstream body as it came', async () => {
    const res = await post({ model: 'm', stream: false });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(await res.json()).toEqual({
      path: '/v1/chat/completions',
      accept: 'application/json',
      body: { model: 'm', stream: false },
    });
  });

  it('pipes a streamed one back as SSE', async () => {
    const res = await post({ model: 'm', stream: true });
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const text = await res.text();
    expect(text).toContain('"accept":"text/event-stream"');
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  it("passes the upstream's status on", async () => {
    expect((await post({ model: 'm' })).status).toBe(429);
  });

  it('answers /readyz', async () => {
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
  });
});
