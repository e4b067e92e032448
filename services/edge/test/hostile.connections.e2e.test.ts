import { connect, type Socket } from 'node:net';
import { Agent, request } from 'undici';
import { expect } from 'vitest';
import { chat, edgeTest as test, KEYS, type Stack } from './harness.js';

/**
 * Connections that hold the edge without calling it. Every connection takes a file descriptor
 * and memory of the edge's (4,000 idle ones: 35 MB, both ends); a client that could keep them
 * for ever could take every descriptor the edge has, and then its calls to upstreams and NATS
 * fail, every tenant's.
 */

const TIMEOUT_MS = 2_000;

function open(s: Stack): Promise<Socket> {
  const url = new URL(s.edge.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname, () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Milliseconds from `since` until the edge closes `socket`, or Infinity past `limitMs`. */
function closedWithin(socket: Socket, since: number, limitMs: number): Promise<number> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(Infinity), limitMs);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(Date.now() - since);
    });
  });
}

test('a connection that sends no request, or its head a byte at a time, is closed at EDGE_REQUEST_TIMEOUT_MS, and so is a later request of a kept-alive one', async ({
  stack,
}) => {
  const s = await stack({ edge: { options: { requestTimeoutMs: TIMEOUT_MS } } });
  const since = Date.now();
  const silent = await open(s);
  const trickle = await open(s);
  trickle.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: edge\r\n`);
  const drip = setInterval(() => trickle.writable && trickle.write('X'), 200);
  // A first request served, then the next one's head a byte at a time.
  const kept = await open(s);
  kept.write('GET /healthz HTTP/1.1\r\nHost: edge\r\n\r\n');
  kept.once('data', () => {
    kept.write(`GET /healthz HTTP/1.1\r\nHost: edge\r\n`);
    const keptDrip = setInterval(
      () => (kept.writable ? kept.write('X') : clearInterval(keptDrip)),
      200,
    );
  });
  for (const socket of [silent, trickle, kept]) socket.on('error', () => undefined);
  // Before, the silent one stayed open (60 s here, and for ever), the trickle until node's check
  // every 30 s (31 s), the kept-alive one likewise.
  const closed = await Promise.all(
    [silent, trickle, kept].map((socket) => closedWithin(socket, since, 60_000)),
  );
  clearInterval(drip);
  for (const ms of closed) {
    expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    // Node's check runs every second: a request head is cut by a second after its deadline.
    expect(ms).toBeLessThan(TIMEOUT_MS + 1_000 + 1_500);
  }
  const metrics = (await s.edge.app.inject({ method: 'GET', url: '/metrics' })).body;
  expect(
    Number(/^edge_slow_requests_total(?:\{[^}]*\})? (\S+)$/m.exec(metrics)?.[1]),
  ).toBeGreaterThanOrEqual(2);
  // A connection that calls in time is served (and its calls are not cut).
  const res = await fetch(`${s.edge.url}/healthz`, {
    headers: { authorization: `Bearer ${KEYS.support}` },
  });
  expect(res.status).toBe(200);
});

test('past EDGE_MAX_CONNECTIONS a new connection is closed as it is accepted, and a client already connected is still served', async ({
  stack,
}) => {
  const MAX = 40;
  const s = await stack({ edge: { options: { maxConnections: MAX } } });
  // Another tenant's client, connected before the flood, keeps its connection.
  const agent = new Agent({ connections: 1, keepAliveTimeout: 60_000 });
  const call = async () => {
    const res = await request(`${s.edge.url}/v1/chat/completions`, {
      method: 'POST',
      dispatcher: agent,
      headers: { authorization: `Bearer ${KEYS.batch}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...chat(5), max_tokens: 5 }),
    });
    await res.body.text();
    return res.statusCode;
  };
  expect(await call()).toBe(200);
  // The flood: connections that send nothing (held until EDGE_REQUEST_TIMEOUT_MS, 30 s here).
  const flood = await Promise.all(Array.from({ length: 2 * MAX }, () => open(s)));
  const since = Date.now();
  const closed = await Promise.all(
    flood.map((socket) => {
      socket.on('error', () => undefined);
      return closedWithin(socket, since, 2_000);
    }),
  );
  // Before, all 80 stayed open; now those past the bound (the client's connection is one of
  // the 40) are closed at once.
  expect(closed.filter((ms) => ms < Infinity).length).toBeGreaterThanOrEqual(MAX + 1);
  const open_ = await new Promise<number>((resolve, reject) =>
    s.edge.app.server.getConnections((err, n) => (err ? reject(err) : resolve(n))),
  );
  expect(open_).toBeLessThanOrEqual(MAX);
  // The connected client's calls go on, its hold closed as usual.
  expect(await call()).toBe(200);
  const metrics = (await s.edge.app.inject({ method: 'GET', url: '/metrics' })).body;
  expect(
    Number(/^edge_dropped_connections_total(?:\{[^}]*\})? (\S+)$/m.exec(metrics)?.[1]),
  ).toBeGreaterThanOrEqual(MAX + 1);
  for (const socket of flood) socket.destroy();
  await agent.close();
  const u = await s.settled('batch-summariser');
  expect(u.windows[0]!.used).toBe(2 * (12 + 5));
});
