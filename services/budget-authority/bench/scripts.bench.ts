/**
 * Redis time per script (issue 14's "Redis at most 40 µs per admit or settle script"): the
 * admit and settle handlers run in-process against a Redis of the bench's own, no NATS, and
 * Redis's own `INFO commandstats` says what each FCALL cost it (its Lua and the commands it
 * ran), beside the bare 3-window check-and-reserve script (an EVALSHA) in the same run. An org with a team
 * under it and three windows, as the issue measures.
 *
 *   pnpm --filter @holdfast/budget-authority bench:scripts      (BENCH_CALLS, default 5,000)
 *
 * Beside commandstats, the Redis process's own CPU time per call (all of its work: parsing
 * the call, the script, the reply), which a busy box does not inflate.
 *
 * And the bytes Redis read per call (`total_net_input_bytes` over the phase, the relay's and
 * sweeper's few commands included): what the authority encodes and sends for each script.
 *
 * BENCH_CALLGRIND=1 runs the bench's Redis under valgrind's callgrind (callgrind.ts) and adds
 * the instructions each script command ran per call: a count, the same on a busy box, so a
 * change to a script can be judged across runs (BENCH_CALLS=1000 keeps it near a minute).
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { requireUrl, resolveInfra } from '@holdfast/testkit/infra';
import { admit } from '../src/handlers/admit.js';
import { settle } from '../src/handlers/close.js';
import { createRedis } from '../src/redis.js';
import { startCallgrindRedis, type CallgrindRedis, type ScriptCommand } from './callgrind.js';
import { admitRequest, MAX_END_USERS, settleRequest, startBenchAuthority } from './requests.js';
import { RAW_LUA, rawKeys } from './raw.js';

const CALLS = Number(process.env.BENCH_CALLS ?? 5_000);
const OWN = process.env.BENCH_OWN === '1';
const IN_FLIGHT = 16;

/** usec per call of a command (evalsha, fcall) since the last reset, and how many calls. */
async function commandStats(redis: ReturnType<typeof createRedis>, command: string) {
  const info = String(await redis.call('INFO', 'commandstats'));
  const m = new RegExp(`cmdstat_${command}:calls=(\\d+),usec=(\\d+)`).exec(info);
  return { calls: Number(m?.[1] ?? 0), usecPerCall: Number(m?.[2] ?? 0) / Number(m?.[1] ?? 1) };
}

/**
 * CPU µs the Redis process spent (utime + stime from /proc), or undefined when it is not on
 * this machine. commandstats is wall time inside each command, so on a shared box a script
 * preempted mid-run counts the other process's time too; CPU time does not.
 */
async function redisCpuUs(redis: ReturnType<typeof createRedis>): Promise<number | undefined> {
  const pid = /process_id:(\d+)/.exec(String(await redis.call('INFO', 'server')))?.[1];
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1e6) / 100;
  } catch {
    return undefined;
  }
}

/** Runs `phase` and returns its commandstats figures with the Redis CPU per call beside them. */
async function measured(
  redis: ReturnType<typeof createRedis>,
  command: ScriptCommand,
  phase: () => Promise<void>,
  callgrind?: CallgrindRedis,
) {
  await redis.call('CONFIG', 'RESETSTAT');
  callgrind?.zero();
  const before = await redisCpuUs(redis);
  await phase();
  const after = await redisCpuUs(redis);
  const instructions = callgrind?.read()[command];
  const stats = await commandStats(redis, command);
  const cpu = before === undefined || after === undefined ? NaN : (after - before) / stats.calls;
  const bytesIn = /total_net_input_bytes:(\d+)/.exec(String(await redis.call('INFO', 'stats')));
  return {
    ...stats,
    cpuPerCall: cpu,
    bytesPerCall: Number(bytesIn?.[1] ?? NaN) / stats.calls,
    instructionsPerCall: instructions === undefined ? NaN : instructions / stats.calls,
  };
}

async function inParallel(n: number, one: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < n) await one(next++);
    }),
  );
}

/** Admits of new end users, each refused at the team's maxEndUsers (its registry filled). */
async function capRefusals(
  ctx: Parameters<typeof admit>[0],
  redis: ReturnType<typeof createRedis>,
  prefix: string,
  callgrind: CallgrindRedis | undefined,
) {
  const users = `${prefix}:{acme}:t:team:users`;
  const now = Date.now();
  for (let i = 0; i < MAX_END_USERS; i += 1_000) {
    const part = Array.from({ length: Math.min(1_000, MAX_END_USERS - i) }, (_, j) => [
      now,
      `seed-${i + j}`,
    ]);
    await redis.zadd(users, ...part.flat());
  }
  const refuse = async (i: number) => {
    const req = { ...admitRequest(randomUUID()), endUser: `new-${i}`, rememberEndUserCap: true };
    const r = await admit(ctx, req as Parameters<typeof admit>[1]);
    if (!r.ok || r.value.admitted || r.value.code !== 'end_user_limit') {
      throw new Error(`not refused end_user_limit: ${JSON.stringify(r).slice(0, 300)}`);
    }
  };
  await refuse(-1); // its filter built and kept
  const kept = await measured(redis, 'fcall', () => inParallel(CALLS, refuse), callgrind);
  const built = await measured(
    redis,
    'fcall',
    async () => {
      for (let i = 0; i < 20; i++) {
        await redis.del(`${users}:filter`);
        await refuse(CALLS + i);
      }
    },
    callgrind,
  );
  return [
    [`refused at maxEndUsers ${MAX_END_USERS}`, kept],
    [`  its filter built each time`, built],
  ] as const;
}

async function main(): Promise<void> {
  const callgrind = process.env.BENCH_CALLGRIND === '1' ? await startCallgrindRedis() : undefined;
  const { urls, stop } = await resolveInfra(callgrind ? ['nats'] : ['redis', 'nats']);
  const redisUrl = callgrind?.url ?? requireUrl(urls, 'redis');
  const redis = createRedis(redisUrl, callgrind ? 60_000 : 5_000);
  await redis.connect();
  const { connect } = await import('@nats-io/transport-node');
  const natsUrl = requireUrl(urls, 'nats');
  const nc = await connect({ servers: natsUrl });
  const authority = await startBenchAuthority({
    natsUrl,
    nc,
    redisUrl,
    // A filter of 10,000 end users built under callgrind takes seconds.
    redisTimeoutMs: callgrind ? 60_000 : 5_000,
  });
  const { prefix } = authority;
  const ctx = authority.authority.ctx;

  const raw = (await redis.script('LOAD', RAW_LUA)) as string;
  const bare = await measured(
    redis,
    'evalsha',
    () =>
      inParallel(CALLS, async () => {
        await redis.evalsha(raw, 3, ...rawKeys(prefix), '1394');
      }),
    callgrind,
  );

  const ids = Array.from({ length: CALLS }, () => randomUUID());
  const admits = await measured(
    redis,
    'fcall',
    () =>
      inParallel(CALLS, async (i) => {
        const r = await admit(ctx, admitRequest(ids[i]!));
        if (!r.ok || !r.value.admitted) throw new Error('not admitted');
      }),
    callgrind,
  );

  const settles = await measured(
    redis,
    'fcall',
    () =>
      inParallel(CALLS, async (i) => {
        const r = await settle(ctx, settleRequest(ids[i]!));
        if (!r.ok || r.value.status !== 'settled') throw new Error('not settled');
      }),
    callgrind,
  );

  // BENCH_OWN: the refusal at the team's maxEndUsers, to an edge that remembers it (the end
  // users it tracks: built once, then kept; and built on every call).
  const capped = OWN ? await capRefusals(ctx, redis, prefix, callgrind) : [];

  const counted = (s: { instructionsPerCall: number }) =>
    callgrind ? ` ${Math.round(s.instructionsPerCall).toLocaleString('en-US').padStart(13)}` : '';
  const row = (
    name: string,
    s: {
      calls: number;
      usecPerCall: number;
      cpuPerCall: number;
      bytesPerCall: number;
      instructionsPerCall: number;
    },
  ) =>
    `${name.padEnd(34)} ${s.usecPerCall.toFixed(1).padStart(8)} µs ${s.cpuPerCall.toFixed(1).padStart(11)} µs ${Math.round(s.bytesPerCall).toLocaleString('en-US').padStart(9)}${counted(s)}   (${s.calls} calls)`;
  console.log(`Redis time per script, ${CALLS} calls, ${IN_FLIGHT} in flight`);
  console.log(
    `${''.padEnd(34)} ${'commandstats'.padStart(11)} ${'Redis CPU/call'.padStart(14)} ${'bytes in'.padStart(9)}${callgrind ? ` ${'instructions'.padStart(13)}` : ''}`,
  );
  console.log(row('bare 3-window check-and-reserve', bare));
  console.log(row('admit (org + team, 3 windows)', admits));
  console.log(row('settle', settles));
  for (const [name, s] of capped) console.log(row(name, s));
  await authority.stop();
  await nc.drain();
  redis.disconnect();
  await stop();
  await callgrind?.stop();
}

await main();
