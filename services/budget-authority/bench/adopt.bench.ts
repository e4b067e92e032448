/**
 * What the first admission after a plan change costs Redis when it adopts the calls in flight
 * (admit.lua `adopt`: it walks the level's in-flight set, one record at a time): N calls in
 * flight on a team with no `maxInFlight`, a budget added, then admissions until one is
 * admitted (each walks ADOPT_STEP records at most and is refused until the walk is done: the
 * longest is what one script holds Redis for) and one after (no walk), each its FCALL's time
 * from `INFO commandstats`. Redis runs one script at a time: every tenant on that Redis (that
 * shard) waits while one walks.
 *
 *   pnpm --filter @holdfast/budget-authority bench:adopt     (BENCH_ADOPT_N, default 1000,10000)
 */
import { randomUUID } from 'node:crypto';
import { namesWithPrefix } from '@holdfast/events';
import { requireUrl, resolveInfra } from '@holdfast/testkit/infra';
import { admit } from '../src/handlers/admit.js';
import { createRedis } from '../src/redis.js';
import { startTestAuthority } from '../src/testing.js';
import { admitRequest, CONFIG } from './requests.js';

const SIZES = (process.env.BENCH_ADOPT_N ?? '1000,10000').split(',').map(Number);
const IN_FLIGHT = 16;

/** CONFIG with a lease no run outlives, no maxInFlight, and `added` budgets on the team. */
function config(added: { window: string; limit: number }[]) {
  const [org, team] = CONFIG.tenants;
  return {
    ...CONFIG,
    tenants: [org, { ...team!, leaseMs: 3_600_000, budgets: [...team!.budgets, ...added] }],
  };
}

async function main(): Promise<void> {
  const { urls, stop } = await resolveInfra(['redis', 'nats']);
  const redisUrl = requireUrl(urls, 'redis');
  const redis = createRedis(redisUrl, 30_000);
  await redis.connect();
  const { connect } = await import('@nats-io/transport-node');
  const nc = await connect({ servers: requireUrl(urls, 'nats') });
  console.log(
    ['calls in flight', 'admissions', 'longest µs', 'walk µs', 'next µs', 'µs/record']
      .map((h, k) => h.padStart(k === 0 ? 15 : 12))
      .join(' '),
  );
  for (const n of SIZES) {
    const prefix = `bench-${randomUUID().slice(0, 8)}`;
    const authority = await startTestAuthority({
      natsUrl: requireUrl(urls, 'nats'),
      nc,
      redisUrl,
      names: namesWithPrefix(prefix),
      keyPrefix: prefix,
      config: config([]),
      clock: false,
      sweepIntervalMs: 60_000,
      redisTimeoutMs: 30_000,
    });
    const { ctx } = authority.authority;
    let next = 0;
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (next < n) {
          next++;
          const r = await admit(ctx, admitRequest(randomUUID()));
          if (!r.ok || !r.value.admitted) throw new Error('not admitted');
        }
      }),
    );
    // A month budget added to the team: a window none of the N holds on.
    const applied = await ctx.config.apply(config([{ window: 'month', limit: 1e12 }]), 'bench');
    if (!applied.ok) throw new Error('config not applied');
    // Admissions until one is admitted: each walks a step (ADOPT_STEP records), refused
    // until the walk is done; their FCALL times, then one more (no walk).
    const one = async () => {
      await redis.call('CONFIG', 'RESETSTAT');
      const r = await admit(ctx, admitRequest(randomUUID()));
      if (!r.ok) throw new Error(r.error.message);
      const info = String(await redis.call('INFO', 'commandstats'));
      const usec = Number(/cmdstat_fcall:calls=\d+,usec=(\d+)/.exec(info)?.[1] ?? NaN);
      return { admitted: r.value.admitted, usec };
    };
    const steps: number[] = [];
    for (;;) {
      const r = await one();
      steps.push(r.usec);
      if (r.admitted) break;
    }
    const after = (await one()).usec;
    const walk = steps.reduce((a, b) => a + b, 0);
    const cells = [n, steps.length, Math.max(...steps), walk, after, (walk - after) / n];
    console.log(
      cells
        .map((x, k) =>
          (k === 5 ? x.toFixed(1) : Math.round(x).toLocaleString('en-US')).padStart(
            k === 0 ? 15 : 12,
          ),
        )
        .join(' '),
    );
    await authority.stop();
  }
  await nc.drain();
  redis.disconnect();
  await stop();
}

await main();
