/**
 * pnpm bench: admissions per second through NATS at 1 and 64 in flight, p50/p99 at a fixed
 * 1,000/s, against the raw baseline measured in the same run (a bare NATS echo, a bare
 * EVALSHA, and NATS to a responder running a bare 3-window Lua). Scenarios are interleaved
 * over rounds and the medians compared, because this machine is noisy.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { natsNamesToEnv } from '@holdfast/config';
import { namesWithPrefix } from '@holdfast/events';
import { AuthorityClient } from '@holdfast/runtime';
import { connect } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import { closedLoop, medians, medianTable, openLoop } from '@holdfast/testkit/infra';
import { requireUrl, resolveInfra, type LoadResult } from '@holdfast/testkit/infra';
import { RAW_LUA, rawKeys } from './raw.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

function child(args: string[], env: Record<string, string>, ready: string): Promise<ChildProcess> {
  const proc = spawn(process.execPath, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    createInterface({ input: proc.stdout }).on('line', (l) => l.includes(ready) && resolve(proc));
    proc.once('exit', (c) => reject(new Error(`${args.join(' ')} exited ${c}`)));
  });
}

async function main(): Promise<void> {
  const { urls, stop } = await resolveInfra(['nats', 'redis']);
  const natsUrl = requireUrl(urls, 'nats');
  const redisUrl = requireUrl(urls, 'redis');
  const names = namesWithPrefix('bench');
  const dir = await mkdtemp(join(tmpdir(), 'holdfast-bench-'));
  const config = join(dir, 'config.json');
  await writeFile(
    config,
    JSON.stringify({
      upstreams: [{ id: 'u', baseUrl: 'http://127.0.0.1:1/v1' }],
      models: [
        { id: 'gpt-4o-mini', upstream: 'u', price: { inputPerMTok: 0.15, outputPerMTok: 0.6 } },
      ],
      tenants: [
        {
          id: 'bench',
          budgets: ['minute', 'day', 'month'].map((window) => ({ window, limit: 1e15 })),
          useCases: [{ id: 'uc', maxTokens: 1_024, models: ['gpt-4o-mini'] }],
        },
      ],
    }),
  );
  const raw = await child(
    ['--import', 'tsx', here('./raw.ts'), natsUrl, redisUrl, 'raw', 'rawbench'],
    {},
    'ready',
  );
  // BENCH_CPU_PROF=<dir>: a V8 CPU profile of the authority process is written there.
  const prof = process.env.BENCH_CPU_PROF;
  const authority = await child(
    [...(prof ? ['--cpu-prof', `--cpu-prof-dir=${prof}`] : []), here('../dist/main.js')],
    {
      NATS_URL: natsUrl,
      REDIS_URL: redisUrl,
      HOLDFAST_CONFIG: config,
      AUTHORITY_OPS_PORT: '0',
      ...natsNamesToEnv(names),
    },
    '"msg":"ready"',
  );

  const nc = await connect({ servers: natsUrl });
  const redis = new Redis(redisUrl);
  const sha = (await redis.script('LOAD', RAW_LUA)) as string;
  const client = new AuthorityClient({ nc, names, timeoutMs: 5_000 });
  const payload = new TextEncoder().encode(
    JSON.stringify({ tenant: 'bench', promptTokens: 370, maxTokens: 1_024 }),
  );
  const admit = async () => {
    const r = await client.admit({
      reservationId: randomUUID(),
      tenant: 'bench',
      keyId: null,
      useCase: 'uc',
      model: 'gpt-4o-mini',
      promptTokens: 370,
      maxTokens: 1_024,
    });
    if (!r.ok || !r.value.admitted) throw new Error('not admitted');
  };
  const scenarios: Record<string, () => Promise<unknown>> = {
    'nats echo': () => nc.request('raw.echo', payload, { timeout: 5_000 }),
    'bare EVALSHA': () => redis.evalsha(sha, 3, ...rawKeys('direct'), '1394'),
    'raw NATS+Lua': () => nc.request('raw.lua', payload, { timeout: 5_000 }),
    'holdfast admit': admit,
  };

  // Warm up every path once.
  for (const op of Object.values(scenarios)) await closedLoop(op, 8, 500);

  const results: Record<string, LoadResult[]> = {};
  const record = (key: string, r: LoadResult) => (results[key] ??= []).push(r);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, op] of Object.entries(scenarios)) {
      record(`${name} @1`, await closedLoop(op, 1, SECONDS * 1_000));
      record(`${name} @64`, await closedLoop(op, 64, SECONDS * 1_000));
    }
    record(
      'raw NATS+Lua 1,000/s',
      await openLoop(scenarios['raw NATS+Lua']!, 1_000, SECONDS * 1_000),
    );
    record('holdfast admit 1,000/s', await openLoop(admit, 1_000, SECONDS * 1_000));
  }

  const m = medians(results);
  console.log(
    `\nbudget-authority admission benchmark: ${ROUNDS} rounds x ${SECONDS} s, medians (node ${process.version}, 2 cores)\n`,
  );
  console.log(medianTable(results, { nameWidth: 26 }));
  const ratio = (a: string, b: string) => (m(a, 'perSecond') / m(b, 'perSecond')).toFixed(2);
  console.log(
    `\nholdfast admit / raw NATS+Lua throughput: @1 ${ratio('holdfast admit @1', 'raw NATS+Lua @1')}x, @64 ${ratio('holdfast admit @64', 'raw NATS+Lua @64')}x (target >= 0.8x)`,
  );
  console.log(
    `holdfast admit p99 at 1,000/s: ${m('holdfast admit 1,000/s', 'p99').toFixed(3)} ms (target <= 2 ms); raw NATS+Lua: ${m('raw NATS+Lua 1,000/s', 'p99').toFixed(3)} ms`,
  );

  raw.kill();
  authority.kill();
  await nc.drain();
  redis.disconnect();
  await stop();
}

void main();
