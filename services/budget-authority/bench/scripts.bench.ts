/**
 * Redis time per script (issue 14's "Redis at most 40 µs per admit or settle script"): the
 * admit and settle handlers run in-process against a Redis of the bench's own, no NATS, and
 * Redis's own `INFO commandstats` says what each EVALSHA cost it (its Lua and the commands it
 * ran), beside the bare 3-window check-and-reserve script in the same run. An org with a team
 * under it and three windows, as the issue measures.
 *
 *   pnpm --filter @holdfast/budget-authority bench:scripts      (BENCH_CALLS, default 5,000)
 */
import { randomUUID } from 'node:crypto';
import { createLogger } from '@holdfast/runtime';
import { requireUrl, resolveInfra } from '@holdfast/testkit/infra';
import { Registry } from 'prom-client';
import { Authority } from '../src/authority.js';
import { admit } from '../src/handlers/admit.js';
import { settle } from '../src/handlers/close.js';
import { createRedis } from '../src/redis.js';
import { admitRequest, CONFIG, settleRequest } from './requests.js';
import { RAW_LUA, rawKeys } from './raw.js';

const CALLS = Number(process.env.BENCH_CALLS ?? 5_000);
const IN_FLIGHT = 16;

/** usec per call of evalsha since the last reset, and how many calls. */
async function evalshaStats(redis: ReturnType<typeof createRedis>) {
  const info = String(await redis.call('INFO', 'commandstats'));
  const m = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(info);
  return { calls: Number(m?.[1] ?? 0), usecPerCall: Number(m?.[2] ?? 0) / Number(m?.[1] ?? 1) };
}

async function inParallel(n: number, one: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < n) await one(next++);
    }),
  );
}

async function main(): Promise<void> {
  const { urls, stop } = await resolveInfra(['redis', 'nats']);
  const redis = createRedis(requireUrl(urls, 'redis'), 5_000);
  await redis.connect();
  const { connect } = await import('@nats-io/transport-node');
  const nc = await connect({ servers: requireUrl(urls, 'nats') });
  const prefix = `bench-${randomUUID().slice(0, 8)}`;
  const authority = new Authority({
    redis,
    nc,
    names: {
      eventsStream: `${prefix.toUpperCase()}_EVENTS`,
      eventsPrefix: `${prefix}.events`,
      authorityPrefix: `${prefix}.authority.v1`,
    },
    logger: createLogger({ name: 'bench', level: 'silent' }),
    registry: new Registry(),
    keyPrefix: prefix,
  });
  await authority.start();
  const applied = await authority.ctx.config.apply(CONFIG, 'bench');
  if (!applied.ok) throw new Error(applied.error.message);
  const ctx = authority.ctx;

  const raw = (await redis.script('LOAD', RAW_LUA)) as string;
  await redis.call('CONFIG', 'RESETSTAT');
  await inParallel(CALLS, async () => {
    await redis.evalsha(raw, 3, ...rawKeys(prefix), '1394');
  });
  const bare = await evalshaStats(redis);

  const ids = Array.from({ length: CALLS }, () => randomUUID());
  await redis.call('CONFIG', 'RESETSTAT');
  await inParallel(CALLS, async (i) => {
    const r = await admit(ctx, admitRequest(ids[i]!));
    if (!r.ok || !r.value.admitted) throw new Error('not admitted');
  });
  const admits = await evalshaStats(redis);

  await redis.call('CONFIG', 'RESETSTAT');
  await inParallel(CALLS, async (i) => {
    const r = await settle(ctx, settleRequest(ids[i]!));
    if (!r.ok || r.value.status !== 'settled') throw new Error('not settled');
  });
  const settles = await evalshaStats(redis);

  const row = (name: string, s: { calls: number; usecPerCall: number }) =>
    `${name.padEnd(34)} ${s.usecPerCall.toFixed(1).padStart(8)} µs   (${s.calls} calls)`;
  console.log(`Redis time per script (INFO commandstats), ${CALLS} calls, ${IN_FLIGHT} in flight`);
  console.log(row('bare 3-window check-and-reserve', bare));
  console.log(row('admit (org + team, 3 windows)', admits));
  console.log(row('settle', settles));
  await authority.stop();
  await nc.drain();
  redis.disconnect();
  await stop();
}

await main();
