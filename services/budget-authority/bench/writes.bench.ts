/**
 * What one write(2) a turn saves (issue 14): the authority's command connection corks its
 * socket for a turn of the event loop (redis.ts, corkEachTurn), so the script calls of one
 * batch leave in one write. Here the admit and settle handlers run in-process, K at once (a
 * batch of K), on the authority's own connection (corked) and on a plain ioredis connection
 * with the same options, alternated round by round on one Redis with the stack's AOF
 * (`appendfsync always`). Per call (an admit and its settle): this process's CPU, Redis's
 * CPU and system calls (from /proc), this process's writes; and the p50 and p99 of the time
 * K admits (or K settles) took.
 *
 *   pnpm --filter @holdfast/budget-authority bench:writes
 *     BENCH_BATCHES (K's, default 1,4,16), BENCH_CALLS (per phase, 2,000), BENCH_ROUNDS (5),
 *     BENCH_FSYNC (always; everysec or no)
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { requireUrl, resolveInfra, startRedisServer, serverBinary } from '@holdfast/testkit/infra';
import { connect } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import type { HandlerContext } from '../src/context.js';
import { admit } from '../src/handlers/admit.js';
import { settle } from '../src/handlers/close.js';
import { admitRequest, settleRequest, startBenchAuthority } from './requests.js';

const BATCHES = (process.env.BENCH_BATCHES ?? '1,4,16').split(',').map(Number);
const CALLS = Number(process.env.BENCH_CALLS ?? 2_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const FSYNC = process.env.BENCH_FSYNC ?? 'always';

/** utime + stime of a process, µs, and its read and write system calls. */
function usage(pid: number | 'self') {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const io = readFileSync(`/proc/${pid}/io`, 'utf8');
  const field = (name: string) => Number(new RegExp(`${name}: (\\d+)`).exec(io)?.[1] ?? NaN);
  return {
    cpu: ((Number(f[11]) + Number(f[12])) * 1e6) / 100,
    reads: field('syscr'),
    writes: field('syscw'),
  };
}

interface Figures {
  client: number;
  redis: number;
  redisReads: number;
  redisWrites: number;
  clientWrites: number;
  p50Ms: number;
  p99Ms: number;
}

/** CALLS calls, `k` admits at once then their `k` settles at once, one batch after the other. */
async function phase(ctx: HandlerContext, k: number, redisPid: number): Promise<Figures> {
  const c0 = process.cpuUsage();
  const r0 = usage(redisPid);
  const m0 = usage('self');
  const times: number[] = [];
  for (let done = 0; done < CALLS; done += k) {
    const ids = Array.from({ length: k }, () => randomUUID());
    let t0 = performance.now();
    const admitted = await Promise.all(ids.map((id) => admit(ctx, admitRequest(id))));
    times.push(performance.now() - t0);
    if (admitted.some((a) => !a.ok || !a.value.admitted)) throw new Error('not admitted');
    t0 = performance.now();
    const settled = await Promise.all(ids.map((id) => settle(ctx, settleRequest(id))));
    times.push(performance.now() - t0);
    if (settled.some((s) => !s.ok || s.value.status !== 'settled')) throw new Error('not settled');
  }
  times.sort((a, b) => a - b);
  const c = process.cpuUsage(c0);
  const r1 = usage(redisPid);
  const m1 = usage('self');
  const calls = Math.ceil(CALLS / k) * k;
  return {
    client: (c.user + c.system) / calls,
    redis: (r1.cpu - r0.cpu) / calls,
    redisReads: (r1.reads - r0.reads) / calls,
    redisWrites: (r1.writes - r0.writes) / calls,
    clientWrites: (m1.writes - m0.writes) / calls,
    p50Ms: times[Math.floor(times.length * 0.5)]!,
    p99Ms: times[Math.floor(times.length * 0.99)]!,
  };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

async function main(): Promise<void> {
  const bin = serverBinary('redis');
  const server = await startRedisServer(bin);
  const { urls, stop } = await resolveInfra(['nats']);
  const natsUrl = requireUrl(urls, 'nats');
  const nc = await connect({ servers: natsUrl });
  const admin = new Redis(server.url);
  await admin.config('SET', 'appendonly', FSYNC === 'no' ? 'no' : 'yes');
  if (FSYNC !== 'no') await admin.config('SET', 'appendfsync', FSYNC);
  const redisPid = Number(/process_id:(\d+)/.exec(await admin.info('server'))?.[1]);
  const started = await startBenchAuthority({
    natsUrl,
    nc,
    redisUrl: server.url,
    redisTimeoutMs: 5_000,
  });
  const corked = started.authority.ctx;
  // createRedis's options without the cork.
  const plainRedis = new Redis(server.url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: 5_000,
    lazyConnect: true,
  });
  await plainRedis.connect();
  const plain: HandlerContext = { ...corked, redis: plainRedis };
  const modes = [
    ['plain', plain],
    ['corked', corked],
  ] as const;
  for (const k of BATCHES) for (const [, ctx] of modes) await phase(ctx, k, redisPid); // warm

  console.log(
    `One write a turn: ${CALLS} calls (admit + settle) a phase, ${ROUNDS} rounds alternated, ` +
      `AOF appendfsync ${FSYNC}; medians, and corked / plain`,
  );
  const keys: (keyof Figures)[] = [
    'client',
    'redis',
    'redisReads',
    'redisWrites',
    'clientWrites',
    'p50Ms',
    'p99Ms',
  ];
  const cols = ['bench µs/call', 'redis µs/call', 'redis reads', 'redis writes', 'bench writes'];
  const line = (head: string, cells: string[]) =>
    console.log(`${head.padEnd(12)}${cells.map((c) => c.padStart(14)).join('')}`);
  line('batch of', [...cols, 'p50 ms', 'p99 ms']);
  for (const k of BATCHES) {
    const got = { plain: [] as Figures[], corked: [] as Figures[] };
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 ? [...modes].reverse() : modes;
      for (const [name, ctx] of order) got[name].push(await phase(ctx, k, redisPid));
    }
    const med = (name: 'plain' | 'corked', key: keyof Figures) =>
      median(got[name].map((f) => f[key]));
    for (const name of ['plain', 'corked'] as const) {
      line(
        `${k} ${name}`,
        keys.map((key) => med(name, key).toFixed(2)),
      );
    }
    line(
      `${k} ratio`,
      keys.map((key) => `${(med('corked', key) / med('plain', key)).toFixed(2)}x`),
    );
  }
  await started.stop();
  plainRedis.disconnect();
  admin.disconnect();
  await nc.drain();
  await stop();
  await server.stop();
}

await main();
