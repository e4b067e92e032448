import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { infraTest as test, waitFor } from '@holdfast/testkit';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import { describe, expect } from 'vitest';
import { FloorAuthority, loadLibrary } from './authority.js';
import { clickhouse, FloorAggregator, FloorAlerter, TABLE_DDL } from './consumers.js';
import { buildFloorEdge, SINGLE_HEADER } from './edge.js';
import { BENCH_KEYS, BENCH_PLAN, CallBuilder, type FloorCall, type Plan } from './plan.js';
import { NAMES } from './protocol.js';
import { BurstPuller } from './pulls.js';
import { Relay } from './relay.js';
import { ensureConsumer, ensureStream } from './streams.js';

const caller = { tenant: 'bench-team', org: 'bench-org', keyId: 'bench-1', useCase: 'UC-BENCH' };
const model = 'gpt-4o-mini';

/** Keys, stream and database of the floor's fixed names: each test starts from none. */
async function clean(redis: Redis): Promise<void> {
  const keys = await redis.keys(`${NAMES.keyPrefix}:*`);
  if (keys.length > 0) await redis.del(...keys);
}

const fcall = (redis: Redis, c: FloorCall) => redis.fcall(c.fn, 3, ...c.keys, ...c.args);

describe('floor.lua', () => {
  // The team's month tokens in buckets of 1 s, three of them: a slide is seen within a test.
  const plan: Plan = {
    ...BENCH_PLAN,
    windows: [
      { name: 'team/tokens', unit: 'tokens', limit: 1_000, bucketMs: 1_000, buckets: 3 },
      { name: 'team/usd', unit: 'usd', limit: 1_000, bucketMs: 60_000, buckets: 60 },
      { name: 'org/usd', unit: 'usd', limit: 1_000, bucketMs: 60_000, buckets: 60 },
    ],
  };
  const b = new CallBuilder(plan, 60_000);
  const admit = (prompt: number, maxTokens: number, reservation: string, now: number) =>
    b.admit(
      { ...caller, model, prompt, maxTokens },
      { event: `a-${reservation}`, reservation },
      now,
    );
  const settle = (reservationId: string, prompt: number, completion: number, now: number) =>
    b.settle({ ...caller, model, reservationId, prompt, completion }, `s-${reservationId}`, now);

  test('holds within every window, refuses past one, settles to the usage, one event each', async ({
    redis,
  }) => {
    await clean(redis);
    await loadLibrary(redis);
    const w = 'floor:{bench-org}:w';
    // Held: 500 tokens, and 100 x 0.15 + 400 x 0.6 = 255 micro-USD on both USD windows.
    expect(await fcall(redis, admit(100, 400, 'r1', 10_000))).toEqual([1]);
    expect(await redis.hmget(w, 'h1', 'h2', 'h3')).toEqual(['500', '255', '255']);
    // 500 held + 600 > 1,000 on the first window.
    expect(await fcall(redis, admit(100, 500, 'r2', 10_000))).toEqual([0, 1]);
    expect(await fcall(redis, admit(1, 1, 'r1', 10_000))).toEqual([2]);
    expect(await fcall(redis, settle('r1', 100, 50, 10_500))).toEqual([1]);
    expect(await redis.hmget(w, 'h1', 's1', 'b1.10', 's2')).toEqual(['0', '150', '150', '45']);
    expect(await fcall(redis, settle('r1', 100, 50, 10_600))).toEqual([0]);
    const outbox = await redis.xrange('floor:{bench-org}:outbox', '-', '+');
    expect(outbox.map(([, f]) => f[1])).toEqual([
      'floor.events.bench-team.reservation.created',
      'floor.events.bench-team.reservation.settled',
    ]);
    const settled = JSON.parse(outbox[1]![1][5]!) as Record<string, unknown>;
    expect(settled).toMatchObject({
      id: 's-r1',
      type: 'reservation.settled',
      time: 10_500,
      reservationId: 'r1',
      ...caller,
      tokens: 150,
      microUsd: 45,
    });
    expect(settled.windows).toEqual([
      { budget: 'team/tokens', limit: 1_000, used: 150, held: 0 },
      { budget: 'team/usd', limit: 1_000, used: 45, held: 0 },
      { budget: 'org/usd', limit: 1_000, used: 45, held: 0 },
    ]);
  });

  test('slides a window: buckets that fell out of it leave its sum', async ({ redis }) => {
    await clean(redis);
    await loadLibrary(redis);
    await fcall(redis, admit(100, 400, 'r1', 10_000));
    await fcall(redis, settle('r1', 100, 50, 10_000));
    // Bucket 10 is live until 12,999 (three buckets of 1 s), gone at 13,000.
    await fcall(redis, admit(1, 1, 'r2', 12_999));
    expect(await redis.hget('floor:{bench-org}:w', 's1')).toBe('150');
    await fcall(redis, admit(1, 1, 'r3', 13_000));
    const w = await redis.hmget('floor:{bench-org}:w', 's1', 'l1', 'b1.10', 'h1');
    expect(w).toEqual(['0', '11', null, '4']);
  });
});

/** A stand-in for the mock: every chat completion answers 16 tokens with its usage. */
async function upstream(): Promise<Server> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ choices: [], usage: { prompt_tokens: 9, completion_tokens: 16 } }));
    });
  }).listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

describe('the floor', () => {
  test('takes calls through edge, authority, relay, JetStream and both consumers into ClickHouse', async ({
    natsUrl,
    redisUrl,
    clickhouseUrl,
    redis,
  }) => {
    await clean(redis);
    await loadLibrary(redis);
    const nc = await connect({ servers: natsUrl });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(NAMES.stream).catch(() => undefined);
    await clickhouse(clickhouseUrl, `DROP DATABASE IF EXISTS ${NAMES.database}`);
    await ensureStream(nc);
    for (const ddl of TABLE_DDL) await clickhouse(clickhouseUrl, ddl);
    await ensureConsumer(nc, NAMES.aggregator, 1_000);
    await ensureConsumer(nc, NAMES.alerter, 1_000);

    const authority = new FloorAuthority({
      nc,
      redis,
      plans: new Map([['bench-team', new CallBuilder(BENCH_PLAN, 60_000)]]),
    });
    const relay = new Relay({
      redis: new Redis(redisUrl),
      nc,
      outboxes: ['floor:{bench-org}:outbox'],
      batch: 1_000,
      pauseMs: 20,
      blockMs: 500,
    });
    const aggregator = new FloorAggregator({
      nc,
      clickhouseUrl,
      batchSize: 25_000,
      flushMs: 100,
    });
    const alerter = new FloorAlerter(nc);
    const pulls = [
      new BurstPuller(nc, NAMES.stream, NAMES.aggregator, {
        batch: 2_000,
        everyMs: 50,
        waitMs: 500,
        onMessages: (m) => aggregator.take(m),
      }),
      new BurstPuller(nc, NAMES.stream, NAMES.alerter, {
        batch: 64,
        everyMs: 50,
        waitMs: 500,
        onMessages: (m) => alerter.take(m),
      }),
    ];
    const mock = await upstream();
    const edge = await buildFloorEdge({
      nc,
      upstreamOrigin: `http://127.0.0.1:${(mock.address() as AddressInfo).port}`,
      keys: BENCH_KEYS,
      maxTokens: 512,
    });
    try {
      authority.start();
      relay.start();
      aggregator.start();
      for (const p of pulls) p.start();
      const url = await edge.app.listen({ host: '127.0.0.1', port: 0 });
      const call = (headers: Record<string, string>) =>
        fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            authorization: 'Bearer sk-hf-bench-stack',
            ...headers,
          },
          body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
        });
      const replies = await Promise.all([
        ...Array.from({ length: 10 }, () => call({})),
        ...Array.from({ length: 10 }, () => call({ [SINGLE_HEADER]: 'single' })),
      ]);
      expect(replies.map((r) => r.status)).toEqual(Array(20).fill(200));
      expect((await call({ authorization: 'Bearer nope' })).status).toBe(401);

      // 20 calls: 40 events, each in ClickHouse once and acked by both consumers.
      const count = async () => {
        const res = await fetch(
          `${clickhouseUrl}/?query=${encodeURIComponent(`SELECT count() FROM ${NAMES.database}.events FINAL`)}`,
        );
        return Number((await res.text()).trim());
      };
      await waitFor(async () => (await count()) === 40, { what: '40 rows', timeoutMs: 20_000 });
      const owed = async () => {
        let n = 0;
        for (const d of [NAMES.aggregator, NAMES.alerter]) {
          const c = await jsm.consumers.info(NAMES.stream, d);
          n += c.num_pending + c.num_ack_pending;
        }
        return n;
      };
      await waitFor(async () => (await owed()) === 0, { what: 'every event acked' });
      expect(edge.settleFailures()).toBe(0);
      // Billed: 20 x (9 + 16) tokens; nothing held.
      expect(await redis.hmget('floor:{bench-org}:w', 's1', 'h1', 'h2', 'h3')).toEqual([
        '500',
        '0',
        '0',
        '0',
      ]);
      expect(alerter.crossings).toBe(0);
    } finally {
      for (const p of pulls) p.stop();
      await edge.close();
      mock.close();
      authority.stop();
      await relay.stop();
      await aggregator.stop();
      await jsm.streams.delete(NAMES.stream).catch(() => undefined);
      await clickhouse(clickhouseUrl, `DROP DATABASE IF EXISTS ${NAMES.database}`);
      await clean(redis);
      await nc.drain();
    }
  });
});
