import {
  createLogger,
  createRegistry,
  connectNats,
  handleShutdown,
  startOpsServer,
} from '@holdfast/runtime';
import { redisTarget } from '@holdfast/config';
import { randomUUID } from 'node:crypto';
import { Authority } from './authority.js';
import { loadConfig } from './config.js';
import { createRedis } from './redis.js';

/** Composition root of the budget authority process. */
async function main(): Promise<void> {
  const config = loadConfig();
  const { env } = config;
  const replicaId = randomUUID();
  const logger = createLogger({
    name: 'budget-authority',
    level: env.LOG_LEVEL,
    base: { replica: replicaId.slice(0, 8) },
  });
  const registry = createRegistry('budget-authority');

  const target = redisTarget(env);
  const redis = createRedis(target, env.AUTHORITY_REDIS_TIMEOUT_MS);
  redis.on('error', (err: Error) => logger.warn({ err: err.message }, 'redis connection error'));
  await redis.connect();
  // No async stack capture per request: it cost 12% of the authority's CPU (relay publishes).
  const nc = await connectNats({
    servers: config.nats.servers,
    name: `budget-authority-${replicaId.slice(0, 8)}`,
    logger,
    noAsyncTraces: true,
  });

  const authority = new Authority({
    redis,
    nc,
    names: config.nats.names,
    logger,
    registry,
    keyPrefix: env.HOLDFAST_KEY_PREFIX,
    replicaId,
    configFile: env.HOLDFAST_CONFIG,
    sweepIntervalMs: env.AUTHORITY_SWEEP_INTERVAL_MS,
    relayLeaseMs: env.AUTHORITY_RELAY_LEASE_MS,
    relayPauseMs: env.AUTHORITY_RELAY_PAUSE_MS,
    durability: {
      replicas: env.AUTHORITY_REDIS_WAIT_REPLICAS ?? (target.cluster ? 1 : 0),
      timeoutMs: env.AUTHORITY_REDIS_WAIT_TIMEOUT_MS,
      connections: env.AUTHORITY_REDIS_WAIT_CONNECTIONS,
    },
    streamReplicas: config.nats.replicas,
  });
  await authority.start();
  const ops = await startOpsServer({
    port: env.AUTHORITY_OPS_PORT,
    logger,
    registry,
    checks: [
      { name: 'redis', check: () => authority.ready() },
      { name: 'nats', check: () => !nc.isClosed() },
    ],
  });
  process.on('SIGHUP', () => void authority.reloadConfigFile());

  handleShutdown(logger, [
    { name: 'redis', stop: () => void redis.quit().catch(() => redis.disconnect()) },
    { name: 'nats', stop: () => nc.drain() },
    { name: 'authority', stop: () => authority.stop() },
    { name: 'ops-server', stop: () => ops.stop() },
  ]);
  logger.info(
    {
      opsPort: ops.port,
      configVersion: authority.ctx.config.version,
      redis: { nodes: target.nodes.length, cluster: target.cluster },
    },
    'ready',
  );
}

main().catch((err: unknown) => {
  // The logger may not exist yet: write one JSON line like pino would.
  process.stderr.write(
    `${JSON.stringify({ level: 60, msg: 'failed to start', err: String(err) })}\n`,
  );
  process.exit(1);
});
