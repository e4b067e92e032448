/**
 * pnpm bench:ab: the edge's CPU per call, this checkout's edge against another checkout's
 * (BENCH_ROOT, e.g. /work/main), in one run. One mock upstream, one authority, both edges on
 * them; the edges take turns (A B B A ...) with the same closed loop of plain and of streamed
 * chat calls, and each phase's CPU per call is the edge process's CPU time over the phase
 * (its /proc/<pid>/stat, user + system) divided by the calls it served. The box is shared, so
 * the figure to read is the ratio of the two edges' medians, not their absolute µs. Each phase
 * also prints the edge's read and write system calls per call (/proc/<pid>/io), exact
 * whatever the load.
 *
 *   BENCH_ROOT (required), BENCH_ROUNDS (4), BENCH_SECONDS (4), BENCH_CONCURRENCY (8);
 *   BENCH_CPU_PROF=a|b|ab: run that edge with node --cpu-prof (profiles in BENCH_PROF_DIR, default .tmp/ab-prof).
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { namesWithPrefix } from '@holdfast/events';
import {
  closedLoop,
  freePort,
  median,
  requireUrl,
  resolveInfra,
  type ServiceProcess,
} from '@holdfast/testkit/infra';
import { Pool } from 'undici';
import { chatBody, chatCall, KEY } from './chat-call.js';
import * as services from './services.js';

const ROOT = process.env.BENCH_ROOT;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const PROFILED = process.env.BENCH_CPU_PROF ?? '';
const PROF_DIR = resolve(process.env.BENCH_PROF_DIR ?? '.tmp/ab-prof');

/** A process's CPU time so far (user + system), in µs, from /proc (clock ticks of 10 ms). */
async function cpuMicros(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

interface Edge {
  name: string;
  proc: ServiceProcess;
  pool: Pool;
}

/** A process's read and write system calls so far (/proc/<pid>/io). */
async function syscalls(pid: number): Promise<{ reads: number; writes: number }> {
  const io = await readFile(`/proc/${pid}/io`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, 'm').exec(io)![1]);
  return { reads: field('syscr'), writes: field('syscw') };
}

async function phase(edge: Edge, stream: boolean): Promise<number> {
  const payload = chatBody(stream);
  const op = () => chatCall(edge.pool, payload);
  const pid = edge.proc.child.pid!;
  const [before, ioBefore] = [await cpuMicros(pid), await syscalls(pid)];
  const result = await closedLoop(op, CONCURRENCY, SECONDS * 1_000);
  const [after, ioAfter] = [await cpuMicros(pid), await syscalls(pid)];
  console.log(
    `  ${edge.name} ${stream ? 'stream' : 'plain'}: ${result.ops} calls, ` +
      `${((ioAfter.reads - ioBefore.reads) / result.ops).toFixed(2)} reads and ` +
      `${((ioAfter.writes - ioBefore.writes) / result.ops).toFixed(2)} writes a call`,
  );
  if (result.errors > 0) throw new Error(`${edge.name}: ${result.errors} calls failed`);
  edge.proc.lines.length = 0;
  return (after - before) / result.ops;
}

async function main(): Promise<void> {
  if (!ROOT) throw new Error('set BENCH_ROOT to the other checkout (e.g. /work/main)');
  const { urls, stop } = await resolveInfra(['nats', 'redis']);
  const natsUrl = requireUrl(urls, 'nats');
  const redisUrl = requireUrl(urls, 'redis');
  const token = `ab${randomBytes(3).toString('hex')}`;
  const names = namesWithPrefix(token);
  const mockPort = await freePort();
  const mockUrl = `http://127.0.0.1:${mockPort}/v1`;
  const config = await services.writeBenchConfig(mockUrl, [services.benchTenant(KEY)]);
  const procs: ServiceProcess[] = [];
  const edges: Edge[] = [];
  try {
    procs.push(await services.startMock(mockPort));
    procs.push(
      await services.startAuthority({ natsUrl, redisUrl, config, keyPrefix: token, names }),
    );
    const entries = {
      a: undefined,
      b: join(resolve(ROOT), 'services/edge/dist/main.js'),
    };
    for (const [name, entry] of Object.entries(entries)) {
      const port = await freePort();
      const nodeArgs = PROFILED.includes(name)
        ? ['--cpu-prof', `--cpu-prof-dir=${join(PROF_DIR, name)}`]
        : [];
      const proc = await services.startEdgeProcess({
        natsUrl,
        port,
        names,
        ...(entry && { entry }),
        nodeArgs,
      });
      procs.push(proc);
      const pool = new Pool(`http://127.0.0.1:${port}`, {
        connections: CONCURRENCY,
        keepAliveTimeout: 30_000,
      });
      edges.push({ name: name === 'a' ? 'this' : ROOT, proc, pool });
    }
    const perCall: Record<string, number[]> = {};
    const kinds = [false, true];
    // Warm both (JIT, pools, the authority's scripts) before measuring.
    for (const edge of edges) for (const s of kinds) await phase(edge, s);
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? edges : [...edges].reverse();
      for (const stream of kinds)
        for (const edge of order)
          (perCall[`${edge.name} ${stream ? 'stream' : 'plain'}`] ??= []).push(
            await phase(edge, stream),
          );
    }
    console.log(
      `edge CPU per call (µs), ${ROUNDS} rounds x ${SECONDS} s, ${CONCURRENCY} in flight, alternated`,
    );
    for (const [name, xs] of Object.entries(perCall))
      console.log(
        `${name.padEnd(28)} median ${median(xs).toFixed(0)}  [${xs.map((x) => x.toFixed(0)).join(', ')}]`,
      );
    for (const kind of ['plain', 'stream']) {
      const a = median(perCall[`this ${kind}`]!);
      const b = median(perCall[`${ROOT} ${kind}`]!);
      console.log(`${kind}: this / ${ROOT} = ${(a / b).toFixed(3)}`);
      // Per round, too: each round's pair ran back to back.
      const ratios = perCall[`this ${kind}`]!.map((x, i) => x / perCall[`${ROOT} ${kind}`]![i]!);
      console.log(`  per round: ${ratios.map((r) => r.toFixed(3)).join(', ')}`);
    }
  } finally {
    await Promise.all(edges.map((e) => e.pool.close()));
    for (const p of procs.reverse()) await p.stop();
    await stop();
  }
}

void main();
