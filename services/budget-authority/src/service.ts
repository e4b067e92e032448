import { redisTarget } from '@holdfast/config';
import {
  connectNats,
  createRegistry,
  startParts,
  type Logger,
  type Started,
} from '@holdfast/runtime';
import { randomUUID } from 'node:crypto';
import type { Registry } from 'prom-client';
import { Authority } from './authority.js';
import type { AuthorityConfig } from './env.js';
import { createRedis } from './redis.js';

export interface AuthorityDeps {
  logger: Logger;
  /** Where metrics go; the ops server serves it. Default: a new registry. */
  registry?: Registry;
  /** Names this replica (NATS connection name, outbox relay lease). Default: a new UUID. */
  replicaId?: string;
  /** Epoch ms for what the process does on its own (AuthorityOptions.clock). */
  clock?: () => number;
  /** Scripts read Redis TIME even with `clock` set (AuthorityOptions.redisTime). */
  redisTime?: boolean;
}

export interface StartedAuthority extends Started {
  authority: Authority;
  redis: { nodes: number; cluster: boolean };
}

/**
 * Starts one authority replica: Redis, NATS, then the authority (handlers, relay, sweeper).
 * Parts stop in reverse: the authority drains its subscriptions, then NATS, then Redis.
 */
export function start(config: AuthorityConfig, deps: AuthorityDeps): Promise<StartedAuthority> {
  const { env } = config;
  const { logger } = deps;
  const replicaId = deps.replicaId ?? randomUUID();
  const registry = deps.registry ?? createRegistry('budget-authority');
  return startParts(logger, async (parts) => {
    const target = redisTarget(env);
    const redis = createRedis(target, env.AUTHORITY_REDIS_TIMEOUT_MS);
    redis.on('error', (err: Error) => logger.warn({ err: err.message }, 'redis connection error'));
    // Not awaited: a quit that hangs on a dead Redis must not hold the exit.
    parts.push({ name: 'redis', stop: () => void redis.quit().catch(() => redis.disconnect()) });
    await redis.connect();
    // No async stack capture per request: it cost 12% of the authority's CPU (relay publishes).
    const nc = await connectNats({
      servers: config.nats.servers,
      name: `budget-authority-${replicaId.slice(0, 8)}`,
      logger,
      noAsyncTraces: true,
    });
    parts.push({ name: 'nats', stop: () => nc.drain() });

    const authority = new Authority({
      redis,
      nc,
      names: config.nats.names,
      logger,
      registry,
      keyPrefix: env.HOLDFAST_KEY_PREFIX,
      clock: deps.clock,
      redisTime: deps.redisTime,
      replicaId,
      configFile: env.HOLDFAST_CONFIG,
      sweepIntervalMs: env.AUTHORITY_SWEEP_INTERVAL_MS,
      closesPurgeEveryMs: env.AUTHORITY_CLOSES_PURGE_EVERY_MS,
      relayLeaseMs: env.AUTHORITY_RELAY_LEASE_MS,
      relayPauseMs: env.AUTHORITY_RELAY_PAUSE_MS,
      durability: {
        replicas: env.AUTHORITY_REDIS_WAIT_REPLICAS ?? (target.cluster ? 1 : 0),
        timeoutMs: env.AUTHORITY_REDIS_WAIT_TIMEOUT_MS,
        connections: env.AUTHORITY_REDIS_WAIT_CONNECTIONS,
      },
      streamReplicas: config.nats.replicas,
    });
    parts.push({ name: 'authority', stop: () => authority.stop() });
    await authority.start();
    return {
      authority,
      redis: { nodes: target.nodes.length, cluster: target.cluster },
      checks: [
        { name: 'redis', check: () => authority.ready() },
        { name: 'nats', check: () => !nc.isClosed() },
      ],
    };
  });
}
