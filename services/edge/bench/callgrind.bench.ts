/**
 * pnpm bench:callgrind: the edge's instructions per call, counted by valgrind's callgrind, a
 * figure the box's load does not move (CPU µs here move by 2x between runs of the same code).
 * One mock upstream and one authority as plain processes; the edge (this checkout's, or
 * BENCH_ENTRY's dist/main.js) under `valgrind --tool=callgrind`. Per kind (plain, then
 * streamed chat calls), a warm-up of BENCH_WARMUP calls, then BENCH_ROUNDS rounds of
 * BENCH_CALLS calls, BENCH_CONCURRENCY in flight: the counters are zeroed before a round and
 * dumped after it (`callgrind_control -z` / `-d`), and the round's total instructions divided by
 * its calls is printed. The dumps stay in BENCH_OUT_DIR (default .tmp/edge-callgrind) for
 * `callgrind_annotate`.
 *
 *   BENCH_CALLS (400), BENCH_ROUNDS (2), BENCH_WARMUP (600), BENCH_CONCURRENCY (8),
 *   BENCH_ENTRY (another checkout's services/edge/dist/main.js), BENCH_NODE_ARGS (flags for the
 *   edge's node, space-separated, e.g. `--no-memory-reducer`: V8's memory reducer starts major
 *   GCs on wall-clock timers, and under callgrind a call takes 50x the wall time).
 */
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { natsNamesToEnv } from '@holdfast/config';
import { namesWithPrefix } from '@holdfast/events';
import { freePort, requireUrl, resolveInfra, type ServiceProcess } from '@holdfast/testkit/infra';
import { Pool } from 'undici';
import { chatBody, chatCall, KEY } from './chat-call.js';
import * as services from './services.js';

const run = promisify(execFile);
const CALLS = Number(process.env.BENCH_CALLS ?? 400);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 600);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const ENTRY = resolve(
  process.env.BENCH_ENTRY ?? fileURLToPath(new URL('../dist/main.js', import.meta.url)),
);
const OUT = resolve(process.env.BENCH_OUT_DIR ?? '.tmp/edge-callgrind');
const NODE_ARGS = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);

/**
 * Loaded before the edge: fastify's plugin timeout off, as under valgrind the edge takes longer
 * than its 10 s to start. fastify reads the timeout once, into its avvio instance; avvio is
 * replaced in require's cache before fastify loads it. In the main thread only: node runs an
 * --import in each worker too (the tokenizer's count workers), whose argv[1] does not lead to
 * fastify, and the edge failed to start ("Cannot find module 'fastify'").
 */
const UNTIMED_PLUGINS = `
import { createRequire } from 'node:module';
import { isMainThread } from 'node:worker_threads';
if (isMainThread) {
  const fromFastify = createRequire(createRequire(process.argv[1]).resolve('fastify'));
  const avvio = fromFastify('avvio');
  const untimed = (server, opts, done) => avvio(server, { ...opts, timeout: 0 }, done);
  Object.assign(untimed, avvio);
  fromFastify.cache[fromFastify.resolve('avvio')].exports = untimed;
}
`;

/** `calls` chat calls, `CONCURRENCY` in flight; throws on any answer but 200. */
async function calls(pool: Pool, stream: boolean, count: number): Promise<void> {
  const payload = chatBody(stream);
  let left = count;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (left-- > 0) await chatCall(pool, payload);
    }),
  );
}

/** The total instructions (Ir) of the newest callgrind dump named `prefix.N`. */
async function lastDumpTotal(prefix: string, seen: Set<string>): Promise<number> {
  for (let i = 0; i < 600; i++) {
    const names = (await readdir(OUT)).filter((n) => n.startsWith(`${prefix}.`) && !seen.has(n));
    for (const name of names) {
      const text = await readFile(join(OUT, name), 'utf8');
      const total = /^(?:totals|summary): (\d+)/m.exec(text);
      if (total) {
        seen.add(name);
        return Number(total[1]);
      }
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error('no callgrind dump');
}

async function main(): Promise<void> {
  await rm(OUT, { recursive: true, force: true });
  await mkdir(OUT, { recursive: true });
  const { urls, stop } = await resolveInfra(['nats', 'redis']);
  const natsUrl = requireUrl(urls, 'nats');
  const token = `cg${randomBytes(3).toString('hex')}`;
  const names = namesWithPrefix(token);
  const mockPort = await freePort();
  const mockUrl = `http://127.0.0.1:${mockPort}/v1`;
  const config = await services.writeBenchConfig(mockUrl, [services.benchTenant(KEY)]);
  const procs: ServiceProcess[] = [];
  const port = await freePort();
  const prefix = 'edge.cg';
  const edge = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--smc-check=all-non-file',
      // Off until the warm-up is done: fastify's 10 s plugin timeout is too short otherwise.
      '--instr-atstart=no',
      `--callgrind-out-file=${join(OUT, prefix)}`,
      process.execPath,
      ...NODE_ARGS,
      '--import',
      `data:text/javascript,${encodeURIComponent(UNTIMED_PLUGINS)}`,
      ENTRY,
    ],
    {
      env: {
        ...process.env,
        LOG_LEVEL: 'info',
        NATS_URL: natsUrl,
        EDGE_PORT: String(port),
        EDGE_HOST: '127.0.0.1',
        // Under callgrind a call is 50x slower: no deadline may cut one short.
        EDGE_ADMIT_TIMEOUT_MS: '60000',
        EDGE_SETTLE_TIMEOUT_MS: '60000',
        // Nor a count (its workers start under callgrind too), nor a request's own deadline.
        EDGE_COUNT_TIMEOUT_MS: '600000',
        EDGE_REQUEST_TIMEOUT_MS: '600000',
        ...natsNamesToEnv(names),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const exited = new Promise<void>((r) => edge.once('exit', () => r()));
  const log: string[] = [];
  createInterface({ input: edge.stderr }).on('line', (line) => log.push(line));
  const pool = new Pool(`http://127.0.0.1:${port}`, {
    connections: CONCURRENCY,
    keepAliveTimeout: 600_000,
  });
  try {
    procs.push(await services.startMock(mockPort));
    procs.push(
      await services.startAuthority({
        natsUrl,
        redisUrl: requireUrl(urls, 'redis'),
        config,
        keyPrefix: token,
        names,
      }),
    );
    await new Promise<void>((ready, fail) => {
      createInterface({ input: edge.stdout }).on('line', (line) => {
        if (line.includes('"msg":"ready"')) ready();
      });
      void exited.then(() =>
        fail(new Error(`the edge exited before ready:\n${log.slice(-20).join('\n')}`)),
      );
    });
    const seen = new Set<string>();
    const control = (...flags: string[]) => run('callgrind_control', [...flags, String(edge.pid)]);
    for (const stream of [false, true]) {
      const kind = stream ? 'stream' : 'plain';
      await calls(pool, stream, WARMUP);
      await control('-i', 'on');
      const perCall: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        await control('-z');
        await calls(pool, stream, CALLS);
        await control('-d');
        perCall.push((await lastDumpTotal(prefix, seen)) / CALLS);
      }
      console.log(
        `${kind}: instructions a call ${perCall.map((x) => Math.round(x).toLocaleString('en')).join(', ')}` +
          ` (${CALLS} calls a round, ${CONCURRENCY} in flight, ${WARMUP} warm-up)`,
      );
    }
  } finally {
    await pool.close();
    edge.kill('SIGTERM');
    await exited;
    for (const p of procs.reverse()) await p.stop();
    await stop();
  }
}

void main();
