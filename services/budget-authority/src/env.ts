import { env, redisEnv } from '@holdfast/config';
import { loadServiceConfig, serviceEnv } from '@holdfast/runtime';
import { z } from 'zod';

/** The authority's environment. */
const AuthorityEnv = serviceEnv({
  /**
   * Redis holding every budget: one URL, or Redis Cluster's startup nodes comma-separated
   * (a list, or REDIS_CLUSTER=true, means Redis Cluster).
   */
  ...redisEnv,
  /** Config file applied at start and on change; optional when a config is already in Redis. */
  HOLDFAST_CONFIG: z.string().optional(),
  /** Prefix of every Redis key. */
  HOLDFAST_KEY_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/)
    .default('hf'),
  /** Port of /healthz, /readyz and /metrics. */
  AUTHORITY_OPS_PORT: env.port(9101),
  /** Lease of an org's outbox relay, ms: how long a crashed replica's orgs wait for another. */
  AUTHORITY_RELAY_LEASE_MS: env.int(5_000, 500, 60_000),
  /**
   * Pause after a small relay round, ms: under light load the next round carries a batch (one
   * XREAD, one XDEL, one wake-up of each consumer for several events). 20 ms cut the stack's
   * CPU per call at 100 calls/s to 0.81x of 2 ms (docs/benchmarks.md); events wait that long more.
   */
  AUTHORITY_RELAY_PAUSE_MS: env.int(20, 0, 1_000),
  /** How often overdue holds are expired, ms. */
  AUTHORITY_SWEEP_INTERVAL_MS: env.int(1_000, 50, 60_000),
  /**
   * How often each replica looks for closes the closes stream kept after they were acked (below
   * its consumer's ack floor, after a NATS node's kill) and purges them, ms.
   */
  AUTHORITY_CLOSES_PURGE_EVERY_MS: env.int(60_000, 100, 3_600_000),
  /** Redis command timeout, ms: past it the authority answers budget_store_unavailable. */
  AUTHORITY_REDIS_TIMEOUT_MS: env.int(1_000, 10, 60_000),
  /**
   * Replicas that must have each write before the authority answers (Redis WAIT); fewer in
   * time fails the call closed. Unset: 1 on Redis Cluster, 0 on a single Redis.
   */
  AUTHORITY_REDIS_WAIT_REPLICAS: z.preprocess(
    (v) => (v === '' ? undefined : v),
    z.coerce.number().int().min(0).max(16).optional(),
  ),
  /** How long a write waits for those replicas, ms (keep it below the command timeout). */
  AUTHORITY_REDIS_WAIT_TIMEOUT_MS: env.int(500, 1, 60_000),
  /** Connections waited writes are spread over (a WAIT holds its connection until it returns). */
  AUTHORITY_REDIS_WAIT_CONNECTIONS: env.int(8, 1, 64),
});
type AuthorityEnv = z.infer<typeof AuthorityEnv>;

/** Parses the environment; throws an EnvError that names each bad variable. */
export function loadConfig(source: NodeJS.ProcessEnv = process.env) {
  return loadServiceConfig(AuthorityEnv, source, (e) => ({ opsPort: e.AUTHORITY_OPS_PORT }));
}
export type AuthorityConfig = ReturnType<typeof loadConfig>;
