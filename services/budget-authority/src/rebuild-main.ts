import { parseArgs } from 'node:util';
import { loadConfigFile, parseConfig, redisTarget } from '@holdfast/config';
import { connectNats, createLogger } from '@holdfast/runtime';
import { loadConfig } from './env.js';
import { Keys } from './keys.js';
import { migrateGlobalKeys } from './migrate.js';
import { jetstream } from '@nats-io/jetstream';
import { createRedis } from './redis.js';
import { clearState, Rebuilder } from './rebuild.js';

/**
 * `node dist/rebuild-main.js [--force]`: rebuilds the authority's Redis state from the event
 * stream, with the authority's own environment (NATS_URL, REDIS_URL, HOLDFAST_KEY_PREFIX, the
 * names, HOLDFAST_CONFIG or the config already in Redis). Run it with the authorities stopped.
 * --force deletes the budget state under the prefix first (never the config), once the events
 * its outboxes still hold are on the stream.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({ options: { force: { type: 'boolean', default: false } } });
  const service = loadConfig();
  const { env } = service;
  const logger = createLogger({ name: 'authority-rebuild', level: env.LOG_LEVEL });
  const redis = createRedis(redisTarget(env), 30_000);
  await redis.connect();
  const nc = await connectNats({
    servers: service.nats.servers,
    name: 'authority-rebuild',
    logger,
  });
  const keys = new Keys(env.HOLDFAST_KEY_PREFIX);
  try {
    await migrateGlobalKeys(redis, keys, logger);
    let config;
    if (env.HOLDFAST_CONFIG) config = await loadConfigFile(env.HOLDFAST_CONFIG);
    else {
      const stored = await redis.get(keys.config);
      if (stored === null) throw new Error('no config: set HOLDFAST_CONFIG or apply one first');
      const parsed = parseConfig(JSON.parse(stored), 'stored config', { limits: false });
      if (!parsed.ok)
        throw new Error(`stored config does not validate: ${parsed.error.errors.join('; ')}`);
      config = parsed.value;
    }
    if (values.force) {
      const { deleted } = await clearState({
        redis,
        keys,
        js: jetstream(nc),
        names: service.nats.names,
        config,
        logger,
      });
      logger.warn({ deleted }, 'deleted the budget state under the prefix');
    }
    const summary = await new Rebuilder({
      redis,
      nc,
      names: service.nats.names,
      keys,
      config,
      logger,
    }).run();
    logger.info(summary, 'rebuilt the budget state from the event stream');
  } finally {
    await nc.drain();
    redis.disconnect();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(
    `${JSON.stringify({ level: 60, msg: 'rebuild failed', err: String(err) })}\n`,
  );
  process.exit(1);
});
