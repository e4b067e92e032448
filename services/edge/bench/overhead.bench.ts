/**
 * pnpm bench: the edge's overhead. A small non-streaming chat call through the edge (auth,
 * prompt count, clamp, admit over NATS, upstream stream relayed and assembled, settle) against
 * the same call straight to the mock upstream, at a fixed 500/s and at 32 in flight. Every
 * piece runs as its own process, as deployed: authority, mock upstream, edge; the scenarios are
 * interleaved over rounds and the medians compared, because this machine is shared and noisy.
 *
 *   BENCH_ROUNDS (3), BENCH_SECONDS (3), BENCH_RATE (500), BENCH_CONCURRENCY (32);
 *   BENCH_PROFILE=<module>: --import'ed into the edge process (e.g. a CPU profiler);
 *   BENCH_ONLY=edge: skip the direct scenarios (to profile the edge alone).
 */
import { randomBytes } from 'node:crypto';
import { namesWithPrefix } from '@holdfast/events';
import {
  closedLoop,
  freePort,
  medians,
  medianTable,
  openLoop,
  requireUrl,
  resolveInfra,
  type LoadResult,
  type ServiceProcess,
} from '@holdfast/testkit/infra';
import { Pool } from 'undici';
import {
  benchTenant,
  startAuthority,
  startEdgeProcess,
  startMock,
  writeBenchConfig,
} from './services.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const RATE = Number(process.env.BENCH_RATE ?? 500);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const KEY = 'sk-holdfast-bench';

const BODY = JSON.stringify({
  model: 'gpt-4o-mini',
  messages: [{ role: 'user', content: 'Summarise the budget report for the team in one line.' }],
  max_tokens: 8,
});

function caller(
  url: string,
  headers: Record<string, string>,
): { op: () => Promise<void>; pool: Pool } {
  const { origin, pathname } = new URL(url);
  const pool = new Pool(origin, { connections: CONCURRENCY * 2, keepAliveTimeout: 30_000 });
  const path = `${pathname.replace(/\/$/, '')}/chat/completions`;
  const op = async () => {
    const res = await pool.request({
      path,
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: BODY,
    });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`${res.statusCode}: ${text.slice(0, 200)}`);
  };
  return { op, pool };
}

async function main(): Promise<void> {
  const { urls, stop } = await resolveInfra(['nats', 'redis']);
  const natsUrl = requireUrl(urls, 'nats');
  const redisUrl = requireUrl(urls, 'redis');
  const token = `bench${randomBytes(3).toString('hex')}`;
  const names = namesWithPrefix(token);
  const [mockPort, edgePort] = [await freePort(), await freePort()];
  const mockUrl = `http://127.0.0.1:${mockPort}/v1`;

  const config = await writeBenchConfig(mockUrl, [benchTenant(KEY)]);

  const procs: ServiceProcess[] = [];
  try {
    procs.push(await startMock(mockPort));
    procs.push(await startAuthority({ natsUrl, redisUrl, config, keyPrefix: token, names }));
    procs.push(
      await startEdgeProcess({
        natsUrl,
        port: edgePort,
        names,
        env: process.env.BENCH_PROFILE
          ? { NODE_OPTIONS: `--import ${process.env.BENCH_PROFILE}` }
          : {},
      }),
    );
    const authorityReady = procs[1]!.lines.find((l) => l.includes('"msg":"ready"'))!;
    const opsPort = (JSON.parse(authorityReady) as { opsPort: number }).opsPort;
    const metrics = {
      edge: `http://127.0.0.1:${edgePort}/metrics`,
      authority: `http://127.0.0.1:${opsPort}/metrics`,
    };
    // The processes log a line per request; keep the parent from holding them all.
    for (const p of procs) p.lines.length = 0;

    const direct = caller(mockUrl, {});
    const edge = caller(`http://127.0.0.1:${edgePort}/v1`, { authorization: `Bearer ${KEY}` });
    const paths = { direct, edge } as const;
    for (const { op } of Object.values(paths)) await closedLoop(op, 8, 1_000);

    const cpuBefore = await cpuSnapshot(metrics);
    const results: Record<string, LoadResult[]> = {};
    const ms = SECONDS * 1_000;
    for (let round = 0; round < ROUNDS; round++) {
      const both = round % 2 === 0 ? (['direct', 'edge'] as const) : (['edge', 'direct'] as const);
      const order = process.env.BENCH_ONLY === 'edge' ? (['edge'] as const) : both;
      for (const name of order) {
        (results[`${name} ${RATE}/s`] ??= []).push(await openLoop(paths[name].op, RATE, ms));
        for (const p of procs) p.lines.length = 0;
      }
      for (const name of order) {
        (results[`${name} @${CONCURRENCY}`] ??= []).push(
          await closedLoop(paths[name].op, CONCURRENCY, ms),
        );
        for (const p of procs) p.lines.length = 0;
      }
    }
    report(results);
    await breakdown(metrics, cpuBefore);
    await Promise.all([direct.pool.close(), edge.pool.close()]);
  } finally {
    for (const p of procs.reverse()) await p.stop();
    await stop();
  }
}

/** Sum of a metric's samples whose line matches `labels`. */
function sample(text: string, name: string, labels = ''): number {
  return text
    .split('\n')
    .filter((l) => (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) && l.includes(labels))
    .reduce((n, l) => n + Number(l.split(' ').pop()), 0);
}

interface CpuSnapshot {
  edgeCpu: number;
  edgeSystem: number;
  authorityCpu: number;
  calls: number;
}

async function cpuSnapshot(urls: { edge: string; authority: string }): Promise<CpuSnapshot> {
  const [edge, authority] = await Promise.all(
    [urls.edge, urls.authority].map(async (u) => (await fetch(u)).text()),
  );
  return {
    edgeCpu: sample(edge!, 'process_cpu_seconds_total'),
    edgeSystem: sample(edge!, 'process_cpu_system_seconds_total'),
    authorityCpu: sample(authority!, 'process_cpu_seconds_total'),
    calls: sample(edge!, 'edge_http_requests_total', 'status="200"'),
  };
}

/**
 * Where the time went: the edge's own histograms (means), and CPU time per call of the edge
 * and of the authority (admit + settle). CPU per call does not depend on how busy the shared
 * machine is, so it is the figure to compare between runs.
 */
async function breakdown(
  urls: { edge: string; authority: string },
  before: CpuSnapshot,
): Promise<void> {
  const text = await (await fetch(urls.edge)).text();
  const mean = (name: string, labels: string) =>
    (sample(text, `${name}_sum`, labels) / sample(text, `${name}_count`, labels)) * 1_000;
  const after = await cpuSnapshot(urls);
  const calls = after.calls - before.calls;
  const perCall = (a: number, b: number) => (((a - b) / calls) * 1_000).toFixed(3);
  console.log(
    `\nedge-side means: admission ${mean('edge_admission_seconds', 'outcome="admitted"').toFixed(3)} ms, ` +
      `upstream first byte ${mean('edge_upstream_first_byte_seconds', 'outcome="200"').toFixed(3)} ms`,
  );
  console.log(
    `CPU per call over ${calls} calls: edge ${perCall(after.edgeCpu, before.edgeCpu)} ms ` +
      `(kernel ${perCall(after.edgeSystem, before.edgeSystem)}), ` +
      `authority (admit + settle) ${perCall(after.authorityCpu, before.authorityCpu)} ms`,
  );
}

function report(results: Record<string, LoadResult[]>): void {
  const m = medians(results);
  console.log(
    `\nedge overhead: ${ROUNDS} rounds x ${SECONDS} s per scenario, interleaved; medians (node ${process.version})\n`,
  );
  console.log(medianTable(results, { nameWidth: 22, rateWidth: 9 }));
  console.log('');
  for (const load of [`${RATE}/s`, `@${CONCURRENCY}`]) {
    const [e, d] = [`edge ${load}`, `direct ${load}`];
    if (!results[d]) continue;
    const p50 = m(e, 'p50') - m(d, 'p50');
    const p99 = m(e, 'p99') - m(d, 'p99');
    console.log(
      `${load.padEnd(8)} overhead p50 ${p50.toFixed(3)} ms (x${(m(e, 'p50') / m(d, 'p50')).toFixed(2)}), ` +
        `p99 ${p99.toFixed(3)} ms (x${(m(e, 'p99') / m(d, 'p99')).toFixed(2)})  targets: p50 <= 1 ms, p99 <= 3 ms`,
    );
  }
}

void main();
