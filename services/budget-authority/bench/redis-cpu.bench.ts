/**
 * Redis's CPU per call at a fixed rate (issue 14): the authority in-process as main.ts starts
 * it (the service's defaults; its relay and sweeper running) on a Redis of its own with the stack's AOF (`appendfsync always`), calls
 * sent at BENCH_RATE a second, each an admit, BENCH_UPSTREAM_MS of "upstream", then its settle
 * (bench/requests.ts). Per call: Redis's user and system CPU (/proc), its write(2)s (AOF writes
 * and replies), its fsyncs (perf, when it may count system calls) and each command from INFO commandstats
 * (calls x µs). At a rate the box keeps,
 * calls rarely share a pass of Redis's loop, so every pass that writes pays its own fsync: the
 * system CPU is mostly those.
 *
 *   pnpm --filter @holdfast/budget-authority bench:redis-cpu
 *     BENCH_ROOTS=/path/to/base,/path/to/this   checkouts (built) measured in turn, a process
 *       each per round, the order reversed every round; medians, and the ratio of the last to
 *       the first (default: this checkout alone)
 *     BENCH_RATE (100), BENCH_UPSTREAM_MS (20), BENCH_SECONDS (6), BENCH_ROUNDS (3)
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { findBinary, requireUrl, resolveInfra, startRedisServer } from '@holdfast/testkit/infra';
import { natsNamesToEnv } from '@holdfast/config';
import { namesWithPrefix } from '@holdfast/events';
import { createLogger } from '@holdfast/runtime';
import { Redis } from 'ioredis';
import type * as Admit from '../src/handlers/admit.js';
import type * as Close from '../src/handlers/close.js';
import type * as Env from '../src/env.js';
import type * as Service from '../src/service.js';
import { admitRequest, CONFIG, settleRequest } from './requests.js';

const RATE = Number(process.env.BENCH_RATE ?? 100);
const UPSTREAM_MS = Number(process.env.BENCH_UPSTREAM_MS ?? 20);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const HERE = fileURLToPath(new URL('../../..', import.meta.url)).replace(/\/$/, '');

interface Figures {
  calls: number;
  ran: number;
  user: number;
  sys: number;
  writes: number;
  /** fdatasync calls per call (perf; NaN without it, or not allowed to count). */
  fsyncs: number;
  /** Per command: calls per call and µs each. */
  commands: Record<string, [number, number]>;
}

/** Time on a CPU, utime and stime (µs), and write system calls of a process. */
function usage(pid: number) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const io = /syscw: (\d+)/.exec(readFileSync(`/proc/${pid}/io`, 'utf8'));
  // Time on a CPU by the scheduler's own count (ns), where utime and stime are 10 ms ticks.
  const ran = Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1e3;
  return { ran, user: Number(f[11]) * 1e4, sys: Number(f[12]) * 1e4, writes: Number(io?.[1]) };
}

/** One phase against `root`'s authority (its dist): prints its figures as JSON. */
async function measure(root: string): Promise<void> {
  const dist = `${root}/services/budget-authority/dist`;
  const { loadConfig } = (await import(`${dist}/env.js`)) as typeof Env;
  const { start } = (await import(`${dist}/service.js`)) as typeof Service;
  const { admit } = (await import(`${dist}/handlers/admit.js`)) as typeof Admit;
  const { settle } = (await import(`${dist}/handlers/close.js`)) as typeof Close;
  const bin = findBinary('redis-server');
  if (!bin) throw new Error('redis-server is not on PATH: apt-get install -y redis-server');
  const server = await startRedisServer(bin);
  const admin = new Redis(server.url);
  await admin.config('SET', 'appendonly', 'yes');
  await admin.config('SET', 'appendfsync', 'always');
  const pid = Number(/process_id:(\d+)/.exec(await admin.info('server'))?.[1]);
  const { urls, stop } = await resolveInfra(['nats']);
  const natsUrl = requireUrl(urls, 'nats');
  // As main.ts starts it: the service's defaults (the relay's pause, lease, sweep), Redis TIME.
  const prefix = `bench-${randomUUID().slice(0, 8)}`;
  const h = await start(
    loadConfig({
      NATS_URL: natsUrl,
      REDIS_URL: server.url,
      HOLDFAST_KEY_PREFIX: prefix,
      AUTHORITY_REDIS_TIMEOUT_MS: '5000',
      ...natsNamesToEnv(namesWithPrefix(prefix)),
    }),
    { logger: createLogger({ name: 'bench', level: 'silent' }) },
  );
  const ctx = h.authority.ctx;
  const applied = await ctx.config.apply(CONFIG, 'test');
  if (!applied.ok) throw new Error(applied.error.message);
  const call = async () => {
    const id = randomUUID();
    const a = await admit(ctx, admitRequest(id));
    if (!a.ok || !a.value.admitted) throw new Error('not admitted');
    await new Promise((r) => setTimeout(r, UPSTREAM_MS));
    const s = await settle(ctx, settleRequest(id));
    if (!s.ok || s.value.status !== 'settled') throw new Error('not settled');
  };
  const run = async (seconds: number) => {
    const calls: Promise<void>[] = [];
    const t0 = performance.now();
    for (let i = 0; i < seconds * RATE; i++) {
      const due = t0 + (i * 1_000) / RATE;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      calls.push(call());
    }
    await Promise.all(calls);
    // The relay's last round and its deletes (they wait for a command, then go alone).
    await new Promise((r) => setTimeout(r, 500));
    return calls.length;
  };
  await run(1);
  await admin.config('RESETSTAT');
  // Redis's fsyncs (fdatasync on Linux), counted in the kernel by perf when it may.
  const perf = findBinary('perf');
  const traced = perf
    ? spawn(perf, ['stat', '-x,', '-e', 'syscalls:sys_enter_fdatasync', '-p', String(pid)], {
        stdio: ['ignore', 'ignore', 'pipe'],
      })
    : undefined;
  let traceText = '';
  traced?.stderr.on('data', (d: Buffer) => (traceText += String(d)));
  if (traced) await new Promise((r) => setTimeout(r, 300));
  const u0 = usage(pid);
  const calls = await run(SECONDS);
  const u1 = usage(pid);
  if (traced) {
    const exited = new Promise((r) => traced.once('exit', r));
    traced.kill('SIGINT');
    await exited;
  }
  const counted = /^(\d+),,syscalls:sys_enter_fdatasync/m.exec(traceText);
  const commands: Figures['commands'] = {};
  for (const line of (await admin.info('commandstats')).split(/\r?\n/)) {
    const m = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line);
    if (m && !m[1]!.startsWith('config')) {
      commands[m[1]!] = [Number(m[2]) / calls, Number(m[3]) / Number(m[2])];
    }
  }
  const figures: Figures = {
    calls,
    ran: (u1.ran - u0.ran) / calls,
    user: (u1.user - u0.user) / calls,
    sys: (u1.sys - u0.sys) / calls,
    writes: (u1.writes - u0.writes) / calls,
    fsyncs: counted ? Number(counted[1]) / calls : NaN,
    commands,
  };
  console.log(JSON.stringify(figures));
  await h.stop();
  admin.disconnect();
  await stop();
  await server.stop();
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** Every root in turn, a process each per round; prints the medians and the last / first. */
function compare(roots: string[]): void {
  const got = new Map<string, Figures[]>(roots.map((r) => [r, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const root of round % 2 ? [...roots].reverse() : roots) {
      const child = spawnSync(
        process.execPath,
        [...process.execArgv, fileURLToPath(import.meta.url)],
        {
          env: { ...process.env, BENCH_ROOT: root },
          encoding: 'utf8',
        },
      );
      const line = child.stdout.trim().split('\n').pop() ?? '';
      if (child.status !== 0 || !line.startsWith('{')) throw new Error(`${root}: ${child.stderr}`);
      const f = JSON.parse(line) as Figures;
      got.get(root)!.push(f);
      console.log(
        `round ${round + 1} ${root}: ${f.ran.toFixed(0)} µs/call (user ${f.user.toFixed(0)}, sys ${f.sys.toFixed(0)}), ${f.fsyncs.toFixed(2)} fsyncs/call`,
      );
    }
  }
  const med = (root: string, f: (x: Figures) => number) => median(got.get(root)!.map(f));
  const names = [
    ...new Set(roots.flatMap((r) => got.get(r)!.flatMap((f) => Object.keys(f.commands)))),
  ].sort();
  const rows: [string, (x: Figures) => number, number][] = [
    ['Redis CPU µs per call', (x) => x.ran, 0],
    ['  user (ticks)', (x) => x.user, 0],
    ['  system (ticks)', (x) => x.sys, 0],
    ['Redis write(2)s per call', (x) => x.writes, 2],
    ['Redis fsyncs per call', (x) => x.fsyncs, 2],
    ...names.flatMap((c): [string, (x: Figures) => number, number][] => [
      [`${c} per call`, (x) => x.commands[c]?.[0] ?? 0, 2],
      [`${c} µs each`, (x) => x.commands[c]?.[1] ?? 0, 1],
    ]),
  ];
  console.log(
    `\nRedis per call at ${RATE} calls/s (admit, ${UPSTREAM_MS} ms, settle; appendfsync always), medians of ${ROUNDS} rounds`,
  );
  console.log(
    ['', ...roots.map((r) => r.slice(-24)), roots.length > 1 ? 'last / first' : '']
      .map((c, i) => (i ? c.padStart(26) : c.padEnd(28)))
      .join(''),
  );
  for (const [name, f, digits] of rows) {
    const values = roots.map((r) => med(r, f));
    const ratio =
      values.length > 1 && values[0]! > 0 ? `${(values.at(-1)! / values[0]!).toFixed(2)}x` : '';
    console.log(
      [
        name.padEnd(28),
        ...values.map((v) => v.toFixed(digits).padStart(26)),
        ratio.padStart(26),
      ].join(''),
    );
  }
}

if (process.env.BENCH_ROOT) await measure(process.env.BENCH_ROOT);
else compare((process.env.BENCH_ROOTS ?? HERE).split(',').filter((r) => r !== ''));
