import { connect, type Msg, type NatsConnection } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import { z } from 'zod';
import { FloorAuthority, loadLibrary } from './authority.js';
import { clickhouse, FloorAggregator, FloorAlerter, TABLE_DDL } from './consumers.js';
import { buildFloorEdge } from './edge.js';
import { BENCH_KEYS, BENCH_PLAN, CallBuilder } from './plan.js';
import { NAMES } from './protocol.js';
import { BurstPuller } from './pulls.js';
import { Relay } from './relay.js';
import { ensureConsumer, ensureStream } from './streams.js';

/**
 * Process entry of the floor's four processes (`node floor/main.js <role>`), started by
 * stack.ts beside the stack on its NATS, Redis and ClickHouse, each its own process so that
 * its CPU is read from /proc. Prints `ready` once it serves; stops on SIGTERM or SIGINT.
 */
const ROLES = ['edge', 'authority', 'aggregator', 'alerter'] as const;
const role = z.enum(ROLES).parse(process.argv[2]);
const Env = z.object({
  NATS_URL: z.string().min(1),
  REDIS_URL: z.string().min(1).optional(),
  CLICKHOUSE_URL: z.url().optional(),
  FLOOR_HOST: z.string().default('127.0.0.1'),
  FLOOR_PORT: z.coerce.number().int().min(1).max(65_535).optional(),
  /** The mock upstream's origin. */
  FLOOR_UPSTREAM: z.url().optional(),
  /** As the real services: the relay's pause, the consumers' bursts and batches. */
  FLOOR_RELAY_PAUSE_MS: z.coerce.number().int().min(0).default(20),
  FLOOR_PULL_EVERY_MS: z.coerce.number().int().min(1).default(250),
  FLOOR_AGGREGATOR_PULL: z.coerce.number().int().min(1).default(2_000),
  FLOOR_ALERTER_PULL: z.coerce.number().int().min(1).default(64),
  FLOOR_FLUSH_MS: z.coerce.number().int().min(10).default(5_000),
});
const env = Env.parse(process.env);
const need = <T>(x: T | undefined, name: string): T => {
  if (x === undefined) throw new Error(`floor ${role}: ${name} is not set`);
  return x;
};

const nc = await connect({ servers: env.NATS_URL, name: `floor-${role}`, noAsyncTraces: true });

const puller = (durable: string, batch: number, onMessages: (m: Msg[]) => void) =>
  new BurstPuller(nc, NAMES.stream, durable, {
    batch,
    everyMs: env.FLOOR_PULL_EVERY_MS,
    waitMs: 1_000,
    onMessages,
  });

async function start(c: NatsConnection): Promise<() => Promise<void>> {
  if (role === 'edge') {
    const edge = await buildFloorEdge({
      nc: c,
      upstreamOrigin: need(env.FLOOR_UPSTREAM, 'FLOOR_UPSTREAM'),
      keys: BENCH_KEYS,
      maxTokens: 512,
    });
    await edge.app.listen({ host: env.FLOOR_HOST, port: need(env.FLOOR_PORT, 'FLOOR_PORT') });
    return () => edge.close();
  }
  if (role === 'authority') {
    const url = need(env.REDIS_URL, 'REDIS_URL');
    const redis = new Redis(url);
    await loadLibrary(redis);
    await ensureStream(c);
    const orgs = [...new Set([...BENCH_KEYS.values()].map((k) => k.org))];
    const plans = new Map([['bench-team', new CallBuilder(BENCH_PLAN, 30 * 60_000)]]);
    const authority = new FloorAuthority({ nc: c, redis, plans });
    const relay = new Relay({
      redis: new Redis(url),
      nc: c,
      outboxes: orgs.map((org) => `${NAMES.keyPrefix}:{${org}}:outbox`),
      batch: 1_000,
      pauseMs: env.FLOOR_RELAY_PAUSE_MS,
      blockMs: 2_000,
    });
    authority.start();
    relay.start();
    return async () => {
      authority.stop();
      await relay.stop();
      redis.disconnect();
    };
  }
  await ensureStream(c);
  if (role === 'aggregator') {
    const url = need(env.CLICKHOUSE_URL, 'CLICKHOUSE_URL');
    for (const ddl of TABLE_DDL) await clickhouse(url, ddl);
    await ensureConsumer(c, NAMES.aggregator, 125_000);
    const aggregator = new FloorAggregator({
      nc: c,
      clickhouseUrl: url,
      batchSize: 25_000,
      flushMs: env.FLOOR_FLUSH_MS,
    });
    const pulls = puller(NAMES.aggregator, env.FLOOR_AGGREGATOR_PULL, (m) => aggregator.take(m));
    aggregator.start();
    pulls.start();
    return async () => {
      pulls.stop();
      await aggregator.stop();
    };
  }
  await ensureConsumer(c, NAMES.alerter, 10_000);
  const alerter = new FloorAlerter(c);
  const pulls = puller(NAMES.alerter, env.FLOOR_ALERTER_PULL, (m) => alerter.take(m));
  pulls.start();
  return () => Promise.resolve(pulls.stop());
}

const stopRole = await start(nc);
process.stdout.write('ready\n');
let stopping = false;
const stop = () => {
  if (stopping) process.exit(1);
  stopping = true;
  stopRole()
    .then(() => nc.drain())
    .then(
      () => process.exit(0),
      () => process.exit(1),
    );
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
