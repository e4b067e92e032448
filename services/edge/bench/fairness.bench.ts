/**
 * pnpm bench:fairness / bench:refusals: tenant B's call latency through the edge, alone and
 * while tenant A keeps 32 calls in flight, every one refused by A's budget. B sends a chat call
 * 20 times a second (an open loop, each call timed from when it was due). Every piece is its
 * own process: mock upstream, authority, and two edges on the same authority, which take turns
 * round by round. Compare the two as ratios.
 *
 * - `--flood bodies` (bench:fairness): A's prompts are 1 MiB, refused once counted, so what A
 *   costs is its bodies and its counting; B's prompts are 20,000 characters. The edges: this
 *   checkout's and, with `--root`, the one built in another checkout (its dist).
 * - `--flood refusals` (bench:refusals): A's and B's prompts are small, so what A costs is the
 *   refusals themselves. The edges: this checkout's with its refusal memory off
 *   (EDGE_REFUSAL_MEMORY_MS=0, every refusal asked of the authority) and on (the default).
 *
 * Also reports the CPU the edge and the authority used during the flood, in percent of a core
 * (B's calls, alike on both edges, included).
 *
 *   pnpm build && pnpm --filter @holdfast/edge bench:fairness --root /work/main
 *   pnpm build && pnpm --filter @holdfast/edge bench:refusals
 *   pnpm build && pnpm --filter @holdfast/edge bench:refusals --users --root /work/main
 *   pnpm build && pnpm --filter @holdfast/edge bench:refusals --model gpt-4o --root /work/main
 *   pnpm build && pnpm --filter @holdfast/edge bench:refusals --users --max-end-users 1
 *   pnpm build && pnpm --filter @holdfast/edge bench:refusals --users --max-end-users 10000 --root /work/main
 *   options: --rounds 3 --seconds 8; --users: each of A's calls names a new end user (the
 *   `user` field); --model: the model A's calls name (gpt-4o: one the config does not have);
 *   --max-end-users: A's maxEndUsers, its budget ample (with --users, A's calls past the first
 *   are refused end_user_limit; A starts with that many end users tracked, so each of its
 *   calls is refused); with --root (refusals), that checkout's edge against this one's, both
 *   with their refusal memory on
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createRedis } from '@holdfast/budget-authority';
import { namesWithPrefix } from '@holdfast/events';
import {
  closedLoop,
  freePort,
  openLoop,
  requireUrl,
  resolveInfra,
  type LoadResult,
  type ServiceProcess,
} from '@holdfast/testkit/infra';
import { Pool } from 'undici';
import { startAuthority, startEdgeProcess, startMock, writeBenchConfig } from './services.js';

const { values: args } = parseArgs({
  options: {
    flood: { type: 'string', default: 'bodies' },
    root: { type: 'string' },
    users: { type: 'boolean', default: false },
    model: { type: 'string', default: 'gpt-4o-mini' },
    'max-end-users': { type: 'string' },
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '8' },
  },
});
if (args.flood !== 'bodies' && args.flood !== 'refusals') {
  throw new Error(`--flood is bodies or refusals, not ${args.flood}`);
}
const REFUSALS = args.flood === 'refusals';
const ROUNDS = Number(args.rounds);
const MS = Number(args.seconds) * 1_000;
/** A's calls in flight (its maxInFlight) and the size of its prompts and B's; B's calls a second. */
const FLOOD = 32;
const A_CHARS = REFUSALS ? 400 : 1024 * 1024;
const B_CHARS = REFUSALS ? 400 : 20_000;
const RATE = 20;
const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));
const KEYS = { a: 'sk-holdfast-bench-a', b: 'sk-holdfast-bench-b' } as const;

/** English-like words, different for each seed (so counts are not one cached text). */
function prose(chars: number, seed: number): string {
  const syllables = ['hold', 'fast', 'bud', 'get', 'ten', 'ant', 'count', 'er', 'pro', 'mpt'];
  const words: string[] = [];
  let length = 0;
  let x = seed * 7919 + 1;
  while (length < chars) {
    x = (x * 1103515245 + 12345) % 2147483648;
    const word = `${syllables[x % 10]}${syllables[(x >> 8) % 10]}${x % 97}`;
    words.push(word);
    length += word.length + 1;
  }
  return words.join(' ').slice(0, chars);
}

const body = (content: string, model = 'gpt-4o-mini') =>
  JSON.stringify({ model, messages: [{ role: 'user', content }], max_tokens: 8 });

/**
 * Calls to an edge with one key, cycling through the bodies given; with `users`, each names a
 * new end user.
 */
function caller(
  url: string,
  key: string,
  bodies: readonly string[],
  connections: number,
  users = false,
) {
  const { origin } = new URL(url);
  const pool = new Pool(origin, { connections, keepAliveTimeout: 30_000 });
  let next = 0;
  const statuses = new Map<number, number>();
  const op = async (): Promise<void> => {
    const n = next++;
    const body = bodies[n % bodies.length]!;
    const res = await pool.request({
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: users ? `${body.slice(0, -1)},"user":"user-${n}"}` : body,
    });
    await res.body.text();
    statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
    if (res.statusCode !== 200 && key === KEYS.b) throw new Error(`B got ${res.statusCode}`);
  };
  return { op, pool, statuses };
}

/**
 * A's budget refuses each of its calls: once counted (1 MiB prompts against 1,000 tokens), or
 * every one (a budget of 10 tokens, smaller than any call); with --max-end-users, A's tenant
 * caps its end users instead.
 */
function writeConfig(mockUrl: string): Promise<string> {
  const sha = (k: string) => createHash('sha256').update(k).digest('hex');
  const users = args['max-end-users'];
  const tenant = (id: 'a' | 'b', limit: number) => ({
    id,
    // maxEndUsers bounds the end users given budgets (endUserBudgets).
    ...(id === 'a' && users
      ? { maxEndUsers: Number(users), endUserBudgets: [{ window: 'day', limit: 1e15 }] }
      : {}),
    maxInFlight: FLOOD,
    budgets: [{ window: 'month', limit }],
    useCases: [{ id: 'uc', maxTokens: 8, models: ['gpt-4o-mini'] }],
    keys: [{ id, sha256: sha(KEYS[id]) }],
  });
  const aLimit = users ? 1e15 : REFUSALS ? 10 : 1_000;
  return writeBenchConfig(mockUrl, [tenant('a', aLimit), tenant('b', 1e15)]);
}

/** The two edges compared: `[name, entry, env]`. */
function edgesToRun(): Array<{ name: string; entry: string; env: Record<string, string> }> {
  const own = here('../dist/main.js');
  if (REFUSALS && !args.root) {
    return [
      { name: 'off', entry: own, env: { EDGE_REFUSAL_MEMORY_MS: '0' } },
      { name: 'on', entry: own, env: {} },
    ];
  }
  const other = args.root ? join(resolve(args.root), 'services/edge/dist/main.js') : undefined;
  return [
    ...(other ? [{ name: 'old', entry: other, env: {} }] : []),
    { name: 'new', entry: own, env: {} },
  ];
}

/** CPU seconds a process has used (utime + stime, /proc/<pid>/stat, 100 ticks a second). */
function cpuSeconds(proc: ServiceProcess): number {
  const stat = readFileSync(`/proc/${proc.child.pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

interface Edge {
  name: string;
  url: string;
  proc: ServiceProcess;
}

interface Round {
  alone: LoadResult;
  flood: LoadResult;
  /** A's calls answered. */
  aCalls: number;
  /** CPU used during the flood, percent of a core, by process. */
  edgeCpu: number;
  authorityCpu: number;
}

async function main(): Promise<void> {
  const { urls, stop } = await resolveInfra(['nats', 'redis']);
  const token = `fair${randomBytes(3).toString('hex')}`;
  const names = namesWithPrefix(token);
  const mockPort = await freePort();
  const config = await writeConfig(`http://127.0.0.1:${mockPort}/v1`);
  const procs: ServiceProcess[] = [];
  try {
    const natsUrl = requireUrl(urls, 'nats');
    const redisUrl = requireUrl(urls, 'redis');
    procs.push(await startMock(mockPort));
    const authority = await startAuthority({ natsUrl, redisUrl, config, keyPrefix: token, names });
    procs.push(authority);
    if (args.users && args['max-end-users'])
      await fill(redisUrl, token, Number(args['max-end-users']));
    const edges: Edge[] = [];
    for (const { name, entry, env } of edgesToRun()) {
      const port = await freePort();
      const proc = await startEdgeProcess({ natsUrl, port, names, entry, env });
      procs.push(proc);
      edges.push({ name, url: `http://127.0.0.1:${port}`, proc });
    }
    const bBodies = Array.from({ length: 64 }, (_, i) => body(prose(B_CHARS, i)));
    const aBodies = Array.from({ length: 8 }, (_, i) =>
      body(prose(A_CHARS, 1_000 + i), args.model),
    );
    const rounds = new Map<string, Round[]>();
    for (let round = 0; round < ROUNDS; round++) {
      for (const edge of round % 2 === 0 ? edges : [...edges].reverse()) {
        const b = caller(edge.url, KEYS.b, bBodies, 64);
        const a = caller(edge.url, KEYS.a, aBodies, FLOOD, args.users);
        await closedLoop(b.op, 4, 1_000); // warm: connections, the worker's encoding
        const alone = await openLoop(b.op, RATE, MS);
        const cpu = [cpuSeconds(edge.proc), cpuSeconds(authority)];
        const [flooded, flood] = await Promise.all([
          openLoop(b.op, RATE, MS),
          closedLoop(a.op, FLOOD, MS),
        ]);
        const aCalls = flood.ops + flood.errors;
        const used = (proc: ServiceProcess, before: number) =>
          ((cpuSeconds(proc) - before) * 100_000) / MS;
        const r: Round = {
          alone,
          flood: flooded,
          aCalls,
          edgeCpu: used(edge.proc, cpu[0]!),
          authorityCpu: used(authority, cpu[1]!),
        };
        rounds.set(edge.name, [...(rounds.get(edge.name) ?? []), r]);
        console.log(
          `round ${round + 1} ${edge.name}: B alone p50 ${alone.p50.toFixed(1)} p99 ${alone.p99.toFixed(1)} ms; ` +
            `with A's flood p50 ${flooded.p50.toFixed(1)} p99 ${flooded.p99.toFixed(1)} ms; ` +
            `CPU: edge ${r.edgeCpu.toFixed(0)}%, authority ${r.authorityCpu.toFixed(0)}%; ` +
            `B answered ${statuses(b.statuses)}; A answered ${statuses(a.statuses)}`,
        );
        await Promise.all([a.pool.close(), b.pool.close()]);
        for (const p of procs) p.lines.length = 0;
      }
    }
    report(edges, rounds);
  } finally {
    for (const p of procs.reverse()) await p.stop();
    await stop();
  }
}

/**
 * A's end users, as many as its maxEndUsers (seen just now): every call of A naming a new one
 * is refused from the first (else a cap of 10,000 takes 10,000 admitted calls to reach).
 */
async function fill(redisUrl: string, prefix: string, maxEndUsers: number): Promise<void> {
  const redis = createRedis(redisUrl, 10_000);
  await redis.connect();
  try {
    const now = Date.now();
    for (let i = 0; i < maxEndUsers; i += 1_000) {
      const part = Array.from({ length: Math.min(1_000, maxEndUsers - i) }, (_, j) => [
        now,
        `seed-${i + j}`,
      ]);
      await redis.zadd(`${prefix}:{a}:t:a:users`, ...part.flat());
    }
  } finally {
    redis.disconnect();
  }
}

/** `n x status` for each status seen. */
function statuses(seen: ReadonlyMap<number, number>): string {
  return [...seen].map(([status, n]) => `${n} x ${status}`).join(', ');
}

function report(edges: readonly Edge[], rounds: Map<string, Round[]>): void {
  const med = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
  console.log(
    `\nB: ${RATE} calls/s with ${B_CHARS.toLocaleString('en-US')}-character prompts; A: ${FLOOD} in flight ` +
      `with ${A_CHARS.toLocaleString('en-US')}-character prompts, each refused; ${ROUNDS} rounds x ${MS / 1_000} s, medians of rounds`,
  );
  console.log(
    'edge  B alone p50  p99 ms   B + flood p50  p99 ms   A calls/s   edge CPU %   authority CPU %',
  );
  for (const { name } of edges) {
    const rs = rounds.get(name) ?? [];
    const m = (f: (r: Round) => number, digits = 1) => med(rs.map(f)).toFixed(digits);
    console.log(
      `${name.padEnd(5)} ${m((r) => r.alone.p50).padStart(11)} ${m((r) => r.alone.p99).padStart(7)} ${m((r) => r.flood.p50).padStart(16)} ${m((r) => r.flood.p99).padStart(7)} ${m((r) => r.aCalls / (MS / 1_000), 0).padStart(11)} ${m((r) => r.edgeCpu, 0).padStart(12)} ${m((r) => r.authorityCpu, 0).padStart(17)}`,
    );
  }
}

void main();
