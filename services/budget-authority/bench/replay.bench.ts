/**
 * Instructions per admit and per settle, the scripts alone: one admit's and one settle's
 * FCALL captured from the handlers (the bench's config and requests, bench/requests.ts;
 * BENCH_OWN=1 for a key's call for an end user), then replayed BENCH_CALLS times each (default
 * 300) against a Redis of its own under valgrind's callgrind (callgrind.ts), a fresh
 * reservation id and fresh event ids each call. Nothing else runs on that Redis (no relay, no
 * sweeper, no bare script), and every call is the same request, so two runs of the same
 * scripts agree within a fraction of a percent: the figure to judge a change to a script by.
 *
 *   pnpm --filter @holdfast/budget-authority bench:replay
 *
 * The calls are captured against a plain Redis (REDIS_URL, or one the bench starts) through
 * this checkout's handlers. BENCH_LUA_DIR=/path/to/src/lua/ replays them against another
 * directory's scripts: only meaningful when that directory's scripts take the same arguments.
 * All admits run first, then the settles, so the holds sets grow to BENCH_CALLS (the bench:scripts
 * figures keep 16 in flight: its ZADDs are cheaper). The clock is Redis's own (`TIME`), as in
 * production. A settle is the handler's last FCALL (BENCH_OWN: the one that names the call's
 * key and end user, after the first asked for them).
 */
import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { namesWithPrefix } from '@holdfast/events';
import { requireUrl, resolveInfra } from '@holdfast/testkit/infra';
import { Redis } from 'ioredis';
import { admit } from '../src/handlers/admit.js';
import { settle } from '../src/handlers/close.js';
import { buildLibrary, scriptLibrary } from '../src/scripts.js';
import { startTestAuthority } from '../src/testing.js';
import { startCallgrindRedis } from './callgrind.js';
import { admitRequest, CONFIG, settleRequest } from './requests.js';

const CALLS = Number(process.env.BENCH_CALLS ?? 300);
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

/** An FCALL as sent: the function's name, the key count, the keys, the arguments. */
type Call = string[];

/**
 * Runs one admit and its settle, twice, through the handlers on a fresh Redis and returns
 * their FCALLs: the first admit's in full (the plan sent whole, after NOPLAN), and the second
 * admit's and settle's (the plan by reference, as every later call sends it).
 */
async function capture(): Promise<{ load: Call; admit: Call; settle: Call; resId: string }> {
  const { urls, stop } = await resolveInfra(['redis', 'nats']);
  const { connect } = await import('@nats-io/transport-node');
  const natsUrl = requireUrl(urls, 'nats');
  const nc = await connect({ servers: natsUrl });
  const prefix = `replay-${randomUUID().slice(0, 8)}`;
  const authority = await startTestAuthority({
    natsUrl,
    nc,
    redisUrl: requireUrl(urls, 'redis'),
    names: namesWithPrefix(prefix),
    keyPrefix: prefix,
    config: CONFIG,
    clock: false,
    redisTimeoutMs: 10_000,
  });
  const ctx = authority.authority.ctx;
  const calls: Call[] = [];
  // One Redis, not a cluster (resolveInfra's).
  const redis = ctx.redis as Redis;
  const send = redis.sendCommand.bind(redis);
  redis.sendCommand = (command, stream) => {
    if (command.name === 'fcall') calls.push(command.args.map(String));
    return send(command, stream);
  };
  const ids = [randomUUID(), randomUUID()];
  for (const id of ids) {
    const a = await admit(ctx, admitRequest(id));
    if (!a.ok || !a.value.admitted) throw new Error(`not admitted: ${JSON.stringify(a)}`);
    const s = await settle(ctx, settleRequest(id));
    if (!s.ok || s.value.status !== 'settled') throw new Error(`not settled: ${JSON.stringify(s)}`);
  }
  redis.sendCommand = send;
  await authority.stop();
  await nc.drain();
  await stop();
  const lib = scriptLibrary().functions;
  const of = (fn: string, id: string) => calls.filter((c) => c[0] === fn && c.includes(id));
  // The plan in full is the longest of the first admit's calls (the first by reference failed).
  const [full] = of(lib.admit, ids[0]!).sort((a, b) => b.length - a.length);
  // The last of each: a settle that named no key or end user is asked again with them.
  const byRef = of(lib.admit, ids[1]!).pop();
  const settled = of(lib.close, ids[1]!).pop();
  if (!full || !byRef || !settled) throw new Error(`FCALLs not captured: ${calls.length} seen`);
  return { load: full, admit: byRef, settle: settled, resId: ids[1]! };
}

/** `call` with its reservation id made `resId` and every other id in it fresh. */
function renamed(call: Call, from: string, resId: string): Call {
  const fresh = new Map<string, string>([[from, resId]]);
  return call.map((a) =>
    a.replace(UUID, (u) => {
      let v = fresh.get(u);
      if (!v) fresh.set(u, (v = randomUUID()));
      return v;
    }),
  );
}

async function main(): Promise<void> {
  const captured = await capture();
  const own = scriptLibrary();
  const dir = process.env.BENCH_LUA_DIR;
  const lib = dir ? buildLibrary(pathToFileURL(dir.endsWith('/') ? dir : `${dir}/`)) : own;
  // The other directory's functions have other names (a hash of their code).
  const rename = (call: Call): Call => {
    const name = Object.entries(own.functions).find(([, fn]) => fn === call[0])?.[0];
    return [lib.functions[name as keyof typeof lib.functions], ...call.slice(1)];
  };
  const cg = await startCallgrindRedis();
  const redis = new Redis(cg.url, { commandTimeout: 300_000, maxRetriesPerRequest: 0 });
  try {
    await redis.call('FUNCTION', 'LOAD', 'REPLACE', lib.code);
    const fcall = (call: Call) => redis.call('FCALL', ...rename(call)) as Promise<unknown[]>;
    const first = await fcall(renamed(captured.load, captured.resId, randomUUID()));
    if (first[0] !== 'ok') throw new Error(`the first admit: ${JSON.stringify(first)}`);
    const ids = Array.from({ length: CALLS }, () => randomUUID());
    const phase = async (call: Call, expect: string) => {
      cg.zero();
      for (const id of ids) {
        const r = await fcall(renamed(call, captured.resId, id));
        if (r[0] !== expect) throw new Error(`${expect} expected: ${JSON.stringify(r)}`);
      }
      return cg.read().fcall / CALLS;
    };
    const admits = await phase(captured.admit, 'ok');
    const settles = await phase(captured.settle, 'settled');
    const n = (x: number) => Math.round(x).toLocaleString('en-US').padStart(9);
    console.log(
      `Instructions per FCALL (callgrind, ${CALLS} calls each, ${process.env.BENCH_OWN === '1' ? 'BENCH_OWN: key + end user' : 'no key'}${dir ? `, scripts of ${dir}` : ''})`,
    );
    console.log(`admit  ${n(admits)}   (${captured.admit.length - 2} keys and arguments)`);
    console.log(`settle ${n(settles)}   (${captured.settle.length - 2} keys and arguments)`);
  } finally {
    redis.disconnect();
    await cg.stop();
  }
}

await main();
