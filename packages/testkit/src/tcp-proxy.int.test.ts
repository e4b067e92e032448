import { once } from 'node:events';
import { createConnection } from 'node:net';
import { connect } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import { expect } from 'vitest';
import { infraTest as test } from './fixtures.js';
import { tcpProxy } from './tcp-proxy.js';

const LATENCY_MS = 100;

test('a latency holds what the server sends for that long, in order, and keeps the scheme of the target', async ({
  redisUrl,
  iso,
}) => {
  const proxy = await tcpProxy(redisUrl, { latencyMs: LATENCY_MS });
  expect(proxy.url).toMatch(/^redis:\/\/127\.0\.0\.1:\d+$/);
  const redis = new Redis(proxy.url, { maxRetriesPerRequest: 0 });
  try {
    await redis.ping();
    const started = performance.now();
    expect(await redis.ping()).toBe('PONG');
    expect(performance.now() - started).toBeGreaterThanOrEqual(LATENCY_MS - 1);
    // Many replies, each in its own chunk or not: they arrive in the order the server sent them.
    const key = `${iso.keyPrefix}:n`;
    const replies = await Promise.all(Array.from({ length: 50 }, () => redis.incr(key)));
    expect(replies).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
  } finally {
    redis.disconnect();
    await proxy.close();
  }
});

test('stall() holds what the server sends, connection up, and resume() delivers all of it', async ({
  natsUrl,
}) => {
  const proxy = await tcpProxy(natsUrl);
  expect(proxy.url).toMatch(/^nats:\/\/127\.0\.0\.1:\d+$/);
  const nc = await connect({ servers: proxy.url, reconnect: false });
  try {
    proxy.stall();
    let answered = false;
    const flushed = nc.flush().then(() => (answered = true));
    await new Promise((r) => setTimeout(r, 300));
    expect(answered).toBe(false);
    expect(nc.isClosed()).toBe(false);
    proxy.resume();
    await flushed;
    expect(answered).toBe(true);
  } finally {
    await nc.close();
    await proxy.close();
  }
});

test('a stall under a latency holds what the latency would have delivered, still in order', async ({
  natsUrl,
}) => {
  const proxy = await tcpProxy(natsUrl, { latencyMs: LATENCY_MS });
  const nc = await connect({ servers: proxy.url, reconnect: false });
  try {
    const order: number[] = [];
    const first = nc.flush().then(() => order.push(1));
    // Stalled while the first answer is still held by the latency.
    proxy.stall();
    const second = nc.flush().then(() => order.push(2));
    await new Promise((r) => setTimeout(r, LATENCY_MS * 3));
    expect(order).toEqual([]);
    proxy.resume();
    await Promise.all([first, second]);
    expect(order).toEqual([1, 2]);
  } finally {
    await nc.close();
    await proxy.close();
  }
});

test('close() drops the connections through it and stops listening', async ({ redisUrl }) => {
  const proxy = await tcpProxy(redisUrl, { latencyMs: LATENCY_MS });
  const { port } = new URL(proxy.url);
  const socket = createConnection({ host: '127.0.0.1', port: Number(port) });
  await once(socket, 'connect');
  const closed = once(socket, 'close');
  await proxy.close();
  await closed;
  const again = createConnection({ host: '127.0.0.1', port: Number(port) });
  const [err] = (await once(again, 'error')) as [NodeJS.ErrnoException];
  expect(err.code).toBe('ECONNREFUSED');
});
