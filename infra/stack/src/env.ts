import { isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_STACK_DIR, env, parseEnv, stackDir } from '@holdfast/config';
import { z } from 'zod';

/** The repository root (this file is infra/stack/{src,dist}/env.*). */
export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Where the stack keeps its data unless HOLDFAST_STACK_DIR says otherwise. */
export { DEFAULT_STACK_DIR };

/** The example config: the teams of seeds/000 and demo keys, the mock as upstream. */
export const EXAMPLE_CONFIG = resolve(REPO_ROOT, 'infra/config/holdfast.example.yaml');

/**
 * `pnpm stack`'s environment. Every service variable (EDGE_PORT, LOG_LEVEL, the NATS names,
 * ...) is also passed through to the processes, so the services read them as usual.
 */
const StackEnv = z.object({
  /**
   * Data of the infra the stack starts (JetStream store, Redis AOF, ClickHouse), stack.json
   * and the admin token.
   */
  HOLDFAST_STACK_DIR: z.string().min(1).optional(),
  /** Config file applied by the authority. */
  HOLDFAST_CONFIG: z.string().min(1).optional(),
  /** Given: use that server. Not given: start nats-server / redis-server / clickhouse-server. */
  NATS_URL: z.string().min(1).optional(),
  /** One Redis, or Redis Cluster nodes comma-separated (then the services use Redis Cluster). */
  REDIS_URL: z.string().min(1).optional(),
  CLICKHOUSE_URL: z.url().optional(),
  /** Set: nats-server serves its monitoring endpoints (/varz, /connz, /jsz) on this port. */
  HOLDFAST_NATS_MONITOR_PORT: z.coerce.number().int().min(1).max(65_535).optional(),
  /** true: NATS, Redis and ClickHouse on free ports, not 4222 / 6379 / 8123 and 9000. */
  HOLDFAST_STACK_FREE_PORTS: env.bool(false),
  EDGE_PORT: env.port(8080),
  MOCK_UPSTREAM_PORT: env.port(8089),
  AUTHORITY_OPS_PORT: env.port(9101),
  BILLING_AGGREGATOR_OPS_PORT: env.port(9102),
  ALERTER_OPS_PORT: env.port(9103),
  /** Address every process listens on (loopback: a dev stack is not exposed by default). */
  HOLDFAST_STACK_HOST: env.string('127.0.0.1'),
  /** Set: the edge calls OpenAI (or OPENAI_BASE_URL) with it instead of the mock. */
  OPENAI_API_KEY: z.string().min(1).optional(),
  OPENAI_BASE_URL: z.url({ protocol: /^https?$/ }).optional(),
  /** The same for the `claude` upstream (Anthropic's Messages API). */
  ANTHROPIC_API_KEY: z.string().min(1).optional(),
  ANTHROPIC_BASE_URL: z.url({ protocol: /^https?$/ }).optional(),
  /** The edge's admin token; unset: the stack makes one and keeps it in `<dir>/admin-token`. */
  EDGE_ADMIN_TOKEN: z.string().min(16).optional(),
  /** true: as `--cluster` (a 3-node NATS cluster with R3 streams). */
  HOLDFAST_STACK_CLUSTER: env.bool(false),
  /** Colours in the prefixes (default: when stdout is a terminal). */
  NO_COLOR: z.string().optional(),
});
type StackEnv = z.infer<typeof StackEnv>;

export interface StackSettings {
  env: StackEnv;
  /** Absolute data dir. */
  dir: string;
  /** Absolute config path. */
  configPath: string;
  /** Environment handed to every child (the caller's, minus what the stack decides itself). */
  childEnv: NodeJS.ProcessEnv;
  /**
   * `pnpm stack --cluster` (or HOLDFAST_STACK_CLUSTER=true): the infra as clusters (a 3-node
   * NATS cluster, a 3-master Redis Cluster), unless their URLs are given.
   */
  cluster: boolean;
}

/** Parses the environment (empty variables count as unset); relative paths are the caller's. */
export function loadSettings(
  source: NodeJS.ProcessEnv = process.env,
  argv: readonly string[] = process.argv.slice(2),
): StackSettings {
  const cleaned = Object.fromEntries(Object.entries(source).filter(([, v]) => v !== ''));
  const parsed = parseEnv(StackEnv, cleaned);
  // pnpm runs root scripts in the repo root; INIT_CWD is where the user typed the command.
  const cwd = source.INIT_CWD ?? process.cwd();
  const abs = (p: string) => (isAbsolute(p) ? p : resolve(cwd, p));
  const childEnv: NodeJS.ProcessEnv = { ...cleaned };
  for (const name of ['HOLDFAST_CONFIG', 'NATS_URL', 'REDIS_URL', 'CLICKHOUSE_URL']) {
    delete childEnv[name];
  }
  return {
    env: parsed,
    dir: stackDir({ ...cleaned, INIT_CWD: cwd }),
    configPath: parsed.HOLDFAST_CONFIG ? abs(parsed.HOLDFAST_CONFIG) : EXAMPLE_CONFIG,
    childEnv,
    cluster: parsed.HOLDFAST_STACK_CLUSTER || argv.includes('--cluster'),
  };
}
