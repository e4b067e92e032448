/**
 * pnpm bench:fairness: tenant B's call latency through the edge, alone and while tenant A keeps
 * its 32 calls in flight full of 1 MiB prompts. B sends a chat call with a 20,000-character
 * prompt 20 times a second (an open loop, each call timed from when it was due); A's calls are
 * refused by its budget once counted, so what A costs is its bodies and its counting, not the
 * model. Every piece is its own process: mock upstream, authority, and the edge of this
 * checkout beside, with `--root`, the edge built in another checkout (its dist), on the same
 * authority; the edges take turns, round by round. Compare the two as ratios.
 *
 *   pnpm build && pnpm --filter @holdfast/edge bench:fairness --root /work/main
 *   options: --rounds 3 --seconds 8
 */
import { createHash, randomBytes } from 'node:crypto';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
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
    root: { type: 'string' },
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '8' },
  },
});
const ROUNDS = Number(args.rounds);
const MS = Number(args.seconds) * 1_000;
/** A's calls in flight (its maxInFlight) and their prompts; B's calls a second. */
const FLOOD = 32;
const FLOOD_CHARS = 1024 * 1024;
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

const body = (content: string) =>
  JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content }], max_tokens: 8 });

/** Calls to an edge with one key, cycling through the bodies given. */
function caller(url: string, key: string, bodies: readonly string[], connections: number) {
  const { origin } = new URL(url);
  const pool = new Pool(origin, { connections, keepAliveTimeout: 30_000 });
  let next = 0;
  const statuses = new Map<number, number>();
  const op = async (): Promise<void> => {
    const res = await pool.request({
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: bodies[next++ % bodies.length],
    });
    await res.body.text();
    statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
    if (res.statusCode !== 200 && key === KEYS.b) throw new Error(`B got ${res.statusCode}`);
  };
  return { op, pool, statuses };
}

/** A's budget refuses each of its calls once counted: its load is its bodies and counts. */
function writeConfig(mockUrl: string): Promise<string> {
  const sha = (k: string) => createHash('sha256').update(k).digest('hex');
  const tenant = (id: 'a' | 'b', limit: number) => ({
    id,
    maxInFlight: FLOOD,
    budgets: [{ window: 'month', limit }],
    useCases: [{ id: 'uc', maxTokens: 8, models: ['gpt-4o-mini'] }],
    keys: [{ id, sha256: sha(KEYS[id]) }],
  });
  return writeBenchConfig(mockUrl, [tenant('a', 1_000), tenant('b', 1e15)]);
}

interface Edge {
  name: string;
  url: string;
  proc: ServiceProcess;
}

async function main(): Promise<void> {
  const { urls, stop } = await resolveInfra(['nats', 'redis']);
  const token = `fair${randomBytes(3).toString('hex')}`;
  const names = namesWithPrefix(token);
  const mockPort = await freePort();
  const mockUrl = `http://127.0.0.1:${mockPort}/v1`;
  const config = await writeConfig(mockUrl);
  const procs: ServiceProcess[] = [];
  try {
    const natsUrl = requireUrl(urls, 'nats');
    const redisUrl = requireUrl(urls, 'redis');
    procs.push(await startMock(mockPort));
    procs.push(await startAuthority({ natsUrl, redisUrl, config, keyPrefix: token, names }));
    const entries = [{ name: 'new', entry: here('../dist/main.js') }];
    if (args.root) {
      const entry = join(resolve(args.root), 'services/edge/dist/main.js');
      entries.unshift({ name: 'old', entry });
    }
    const edges: Edge[] = [];
    for (const { name, entry } of entries) {
      const port = await freePort();
      const proc = await startEdgeProcess({ natsUrl, port, names, entry });
      procs.push(proc);
      edges.push({ name, url: `http://127.0.0.1:${port}`, proc });
    }
    const bBodies = Array.from({ length: 64 }, (_, i) => body(prose(20_000, i)));
    const aBodies = Array.from({ length: 8 }, (_, i) => body(prose(FLOOD_CHARS, 1_000 + i)));
    const results = new Map<string, LoadResult[]>();
    const aCalls = new Map<string, number[]>();
    for (let round = 0; round < ROUNDS; round++) {
      for (const edge of round % 2 === 0 ? edges : [...edges].reverse()) {
        const b = caller(edge.url, KEYS.b, bBodies, 64);
        const a = caller(edge.url, KEYS.a, aBodies, FLOOD);
        await closedLoop(b.op, 4, 1_000); // warm: connections, the worker's encoding
        const alone = await openLoop(b.op, RATE, MS);
        const [flooded, flood] = await Promise.all([
          openLoop(b.op, RATE, MS),
          closedLoop(a.op, FLOOD, MS),
        ]);
        for (const [key, r] of [
          [`${edge.name}|alone`, alone],
          [`${edge.name}|flood`, flooded],
        ] as const) {
          results.set(key, [...(results.get(key) ?? []), r]);
        }
        aCalls.set(edge.name, [...(aCalls.get(edge.name) ?? []), flood.ops + flood.errors]);
        console.log(
          `round ${round + 1} ${edge.name}: B alone p50 ${alone.p50.toFixed(1)} p99 ${alone.p99.toFixed(1)} ms; ` +
            `with A's flood p50 ${flooded.p50.toFixed(1)} p99 ${flooded.p99.toFixed(1)} ms; ` +
            `B answered ${statuses(b.statuses)}; A answered ${statuses(a.statuses)}`,
        );
        await Promise.all([a.pool.close(), b.pool.close()]);
        for (const p of procs) p.lines.length = 0;
      }
    }
    report(edges, results, aCalls);
  } finally {
    for (const p of procs.reverse()) await p.stop();
    await stop();
  }
}

/** `n x status` for each status seen. */
function statuses(seen: ReadonlyMap<number, number>): string {
  return [...seen].map(([status, n]) => `${n} x ${status}`).join(', ');
}

function report(
  edges: readonly Edge[],
  results: Map<string, LoadResult[]>,
  aCalls: Map<string, number[]>,
): void {
  const med = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
  console.log(
    `\nB: ${RATE} calls/s with 20,000-character prompts; A: ${FLOOD} in flight with 1 MiB prompts; ` +
      `${ROUNDS} rounds x ${MS / 1_000} s, medians of rounds (ms)`,
  );
  console.log('edge  B alone p50  p99      B + flood p50  p99        A answered/round');
  for (const { name } of edges) {
    const alone = results.get(`${name}|alone`) ?? [];
    const flood = results.get(`${name}|flood`) ?? [];
    const p = (rs: LoadResult[], k: 'p50' | 'p99') => med(rs.map((r) => r[k])).toFixed(1);
    console.log(
      `${name.padEnd(5)} ${p(alone, 'p50').padStart(11)} ${p(alone, 'p99').padStart(8)} ${p(flood, 'p50').padStart(14)} ${p(flood, 'p99').padStart(10)} ${String(med(aCalls.get(name) ?? [0])).padStart(18)}`,
    );
  }
}

void main();
