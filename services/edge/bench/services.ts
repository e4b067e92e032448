import { createHash } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { natsNamesToEnv } from '@holdfast/config';
import type { NatsNames } from '@holdfast/events';
import { startService, type ServiceProcess } from '@holdfast/testkit/infra';

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

/** A start's deadline: on the shared box at load 25-40 an authority took over 20 s to start. */
const LOADED = { readyTimeoutMs: 120_000 };

/** The mock upstream as its own process, answering 8 output tokens. */
export function startMock(port: number): Promise<ServiceProcess> {
  return startService(
    here('../../../infra/mock-upstream/dist/main.js'),
    {
      MOCK_UPSTREAM_PORT: String(port),
      MOCK_UPSTREAM_HOST: '127.0.0.1',
      MOCK_UPSTREAM_COMPLETION: 'fixed:8',
    },
    LOADED,
  );
}

/** The budget authority of this checkout as its own process, on the bench's names and keys. */
export function startAuthority(opts: {
  natsUrl: string;
  redisUrl: string;
  /** Path of the config document. */
  config: string;
  keyPrefix: string;
  names: NatsNames;
}): Promise<ServiceProcess> {
  return startService(
    here('../../budget-authority/dist/main.js'),
    {
      NATS_URL: opts.natsUrl,
      REDIS_URL: opts.redisUrl,
      HOLDFAST_CONFIG: opts.config,
      HOLDFAST_KEY_PREFIX: opts.keyPrefix,
      AUTHORITY_OPS_PORT: '0',
      ...natsNamesToEnv(opts.names),
    },
    LOADED,
  );
}

/** An edge (its dist/main.js, this checkout's or another's) as its own process on 127.0.0.1. */
export function startEdgeProcess(opts: {
  natsUrl: string;
  port: number;
  names: NatsNames;
  /** Default: this checkout's edge. */
  entry?: string;
  env?: Record<string, string>;
  /** Flags for node itself (e.g. `--cpu-prof`). */
  nodeArgs?: readonly string[];
}): Promise<ServiceProcess> {
  return startService(
    opts.entry ?? here('../dist/main.js'),
    {
      NATS_URL: opts.natsUrl,
      EDGE_PORT: String(opts.port),
      EDGE_HOST: '127.0.0.1',
      ...natsNamesToEnv(opts.names),
      ...opts.env,
    },
    { ...LOADED, nodeArgs: opts.nodeArgs ?? [] },
  );
}

/**
 * Writes a config document for a bench: the mock as the one upstream, gpt-4o-mini on it counted
 * with o200k, and these tenants. Returns its path.
 */
export async function writeBenchConfig(mockUrl: string, tenants: unknown[]): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'holdfast-edge-bench-'));
  const path = join(dir, 'config.json');
  const model = {
    id: 'gpt-4o-mini',
    upstream: 'mock',
    tokenizer: 'o200k_base',
    price: { inputPerMTok: 0.15, outputPerMTok: 0.6 },
  };
  await writeFile(
    path,
    JSON.stringify({ upstreams: [{ id: 'mock', baseUrl: mockUrl }], models: [model], tenants }),
  );
  return path;
}

/** One tenant without limits in practice (1e15 tokens a minute, day and month), one key. */
export function benchTenant(key: string): unknown {
  return {
    id: 'bench',
    budgets: ['minute', 'day', 'month'].map((window) => ({ window, limit: 1e15 })),
    useCases: [{ id: 'uc', maxTokens: 64, models: ['gpt-4o-mini'] }],
    keys: [{ id: 'bench', sha256: createHash('sha256').update(key).digest('hex') }],
  };
}
