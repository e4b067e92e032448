import { BatchReply, ERROR_HEADER } from '@holdfast/events';
import { startNatsServer, type LocalServer, serverBinary } from '@holdfast/testkit';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { Ok } from './errors.js';
import { request, serve, serveBatch, type Route } from './rpc.js';

/** A server with a small payload limit, so a reply of a few KB is over it. */
const MAX_PAYLOAD = 8_192;

/** Every log line the serving side writes, parsed. */
const lines: Record<string, unknown>[] = [];
const logger = pino(
  { level: 'debug' },
  { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
);

let server: LocalServer;
let nc: NatsConnection;

beforeAll(async () => {
  server = await startNatsServer(serverBinary('nats'), `max_payload: ${MAX_PAYLOAD}`);
  nc = await connect({ servers: server.url });
});
afterAll(async () => {
  await nc?.close();
  await server?.stop();
});

/** A reply of `n` bytes or so: a listing that grew. */
const listing = (n: number) => ({ rows: Array.from({ length: n / 10 }, () => 'x'.repeat(8)) });
const Any = z.unknown();
const Sized = z.strictObject({ bytes: z.int() });

describe('a reply over the NATS server max_payload', () => {
  test('a single reply over the limit: the requester gets reply_too_large at once, not a timeout, and it is logged', async () => {
    const subject = `t.${crypto.randomUUID()}.big`;
    const sub = serve(nc, subject, Sized, (req) => Promise.resolve(Ok(listing(req.bytes))), {
      logger,
      queue: 'q',
    });
    const started = performance.now();
    const r = await request(nc, subject, { bytes: 40_000 }, Any, 5_000);
    const ms = performance.now() - started;
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.error.code).toBe('reply_too_large');
    expect(r.error.message).toMatch(/over the NATS max_payload of 8192 bytes/);
    expect(ms).toBeLessThan(1_000);
    const logged = lines.find((l) => l.subject === subject && l.msg === 'reply too large');
    expect(logged).toMatchObject({ level: 50, maxPayload: MAX_PAYLOAD });
    expect(logged?.bytes).toBeGreaterThan(MAX_PAYLOAD);

    // A reply under the limit still goes as it is.
    const small = await request(nc, subject, { bytes: 2_000 }, Any, 5_000);
    expect(small.ok).toBe(true);
    sub.unsubscribe();
  });

  test('one batch item whose answer alone is over the limit: that item answers reply_too_large, the others their values', async () => {
    const subject = `t.${crypto.randomUUID()}.batch`;
    const route: Route = {
      schema: Sized,
      handler: (req) => Promise.resolve(Ok(listing((req as { bytes: number }).bytes))),
    };
    const sub = serveBatch(
      nc,
      subject,
      { admit: route, extend: route, renew: route, settle: route, release: route },
      { logger, queue: 'q' },
    );
    const items = [
      { op: 'admit', body: { bytes: 100 } },
      { op: 'admit', body: { bytes: 40_000 } },
      { op: 'admit', body: { bytes: 100 } },
    ];
    const inbox = nc.subscribe('_INBOX.>');
    const replies: BatchReply['items'] = [];
    const collect = (async () => {
      for await (const m of inbox) {
        replies.push(...BatchReply.parse(m.json()).items);
        if (replies.length === items.length) break;
      }
    })();
    nc.publish(subject, JSON.stringify({ items }), { reply: `_INBOX.${crypto.randomUUID()}` });
    await Promise.race([
      collect,
      new Promise((_, reject) => setTimeout(() => reject(new Error('not all answered')), 2_000)),
    ]);
    inbox.unsubscribe();
    const byIndex = replies.sort((a, b) => a.i - b.i);
    expect(byIndex.map((a) => a.ok)).toEqual([true, false, true]);
    expect(byIndex[1]).toMatchObject({ ok: false, code: 'reply_too_large' });
    sub.unsubscribe();
  });

  test('a request over the limit: request_too_large at once (nothing sent), not a timeout', async () => {
    const subject = `t.${crypto.randomUUID()}.echo`;
    const sub = serve(nc, subject, Any, () => Promise.resolve(Ok({})), { logger, queue: 'q' });
    const started = performance.now();
    const r = await request(nc, subject, listing(40_000), Any, 5_000);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.error.code).toBe('request_too_large');
    expect(r.error.retry).toBe(false);
    expect(performance.now() - started).toBeLessThan(1_000);
    sub.unsubscribe();
  });

  test('an error reply carries the code in headers, with an empty body', async () => {
    const subject = `t.${crypto.randomUUID()}.raw`;
    const sub = serve(nc, subject, Sized, (req) => Promise.resolve(Ok(listing(req.bytes))), {
      logger,
      queue: 'q',
    });
    const m = await nc.request(subject, JSON.stringify({ bytes: 40_000 }), { timeout: 2_000 });
    expect(m.headers?.get(ERROR_HEADER)).toBe('reply_too_large');
    expect(m.data.length).toBe(0);
    sub.unsubscribe();
  });
});
