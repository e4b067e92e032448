/**
 * What durability costs (issue 13): one admit and its settle through the handlers, in process
 * (no NATS hop, so the difference is Redis's), on every durability setting side by side, the
 * scenarios interleaved over rounds and the medians compared (this machine is noisy):
 *
 *   one Redis, no AOF             the floor
 *   one Redis, appendfsync everysec   what `pnpm stack` and compose used before issue 13
 *   one Redis, appendfsync always     their default now
 *   Redis Cluster 3x1, WAIT 0     a cluster answering once the master has a write (everysec)
 *   Redis Cluster 3x1, WAIT 1     the cluster default: a replica has it before the answer
 *
 *   pnpm --filter @holdfast/budget-authority bench:durability   (BENCH_ROUNDS, BENCH_SECONDS)
 */
import { randomUUID } from 'node:crypto';
import {
  closedLoop,
  medianTable,
  openLoop,
  requireUrl,
  resolveInfra,
  startKillableRedis,
  startRedisCluster,
  startRedisServer,
  type LoadResult,
  serverBinary,
} from '@holdfast/testkit/infra';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { admit } from '../src/handlers/admit.js';
import { settle } from '../src/handlers/close.js';
import { admitRequest, settleRequest, startBenchAuthority } from './requests.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);

/** An in-process authority on `redisUrl` (a list is a cluster); one admit + settle and its teardown. */
async function variant(nc: NatsConnection, natsUrl: string, redisUrl: string, wait: number) {
  const started = await startBenchAuthority({
    natsUrl,
    nc,
    redisUrl,
    redisTimeoutMs: 5_000,
    durability: { replicas: wait, timeoutMs: 500 },
  });
  const ctx = started.authority.ctx;
  const call = async () => {
    const reservationId = randomUUID();
    const a = await admit(ctx, admitRequest(reservationId));
    if (!a.ok || !a.value.admitted) throw new Error('not admitted');
    const s = await settle(ctx, settleRequest(reservationId));
    if (!s.ok || s.value.status !== 'settled') throw new Error('not settled');
  };
  return {
    call,
    stop: () => started.stop(),
  };
}

async function main(): Promise<void> {
  const bin = serverBinary('redis');
  const { urls, stop } = await resolveInfra(['nats']);
  const natsUrl = requireUrl(urls, 'nats');
  const nc = await connect({ servers: natsUrl });
  const noAof = await startRedisServer(bin);
  const everysec = await startKillableRedis(bin, { appendfsync: 'everysec' });
  const always = await startKillableRedis(bin, { appendfsync: 'always' });
  const cluster = await startRedisCluster(bin, { appendfsync: 'everysec' });
  const variants = {
    'one Redis, no AOF': await variant(nc, natsUrl, noAof.url, 0),
    'one Redis, AOF everysec': await variant(nc, natsUrl, everysec.url, 0),
    'one Redis, AOF always': await variant(nc, natsUrl, always.url, 0),
    'cluster 3x1, WAIT 0': await variant(nc, natsUrl, cluster.url, 0),
    'cluster 3x1, WAIT 1': await variant(nc, natsUrl, cluster.url, 1),
  };
  for (const v of Object.values(variants)) await closedLoop(v.call, 8, 500);

  const results: Record<string, LoadResult[]> = {};
  const record = (key: string, r: LoadResult) => (results[key] ??= []).push(r);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, v] of Object.entries(variants)) {
      record(`${name} @1`, await closedLoop(v.call, 1, SECONDS * 1_000));
      record(`${name} @64`, await closedLoop(v.call, 64, SECONDS * 1_000));
      record(`${name} 500/s`, await openLoop(v.call, 500, SECONDS * 1_000));
    }
  }
  console.log(
    `\nadmit + settle per durability setting: ${ROUNDS} rounds x ${SECONDS} s, medians (node ${process.version}, in process, ext4 disk)\n`,
  );
  console.log(medianTable(results, { nameWidth: 38, rateLabel: 'pairs/s' }));
  for (const v of Object.values(variants)) await v.stop();
  await nc.drain();
  await Promise.all([noAof.stop(), everysec.stop(), always.stop(), cluster.stop()]);
  await stop();
}

await main();
