import { parseArgs } from 'node:util';
import { loadConfigFile, natsNames, parseConfig } from '@holdfast/config';
import { connectNats, createLogger } from '@holdfast/runtime';
import { loadEnv } from './config.js';
import { Keys } from './keys.js';
import { createRedis } from './redis.js';
import { Rebuilder, stateKeys } from './rebuild.js';

/**
 * `node dist/rebuild-main.js [--force]`: rebuilds the authority's Redis state from the event
 * stream, with the authority's own environment (NATS_URL, REDIS_URL, HOLDFAST_KEY_PREFIX, the
 * names, HOLDFAST_CONFIG or the config already in Redis). Run it with the authorities stopped.
 * --force deletes the budget state under the prefix first (never the config).
 */
async function main(): Promise<void> {
  const { values } = parseArgs({ options: { force: { type: 'boolean', default: false } } });
  const env = loadEnv();
  const logger = createLogger({ name: 'authority-rebuild', level: env.LOG_LEVEL });
  const redis = createRedis(env.REDIS_URL, 30_000);
  await redis.connect();
  const nc = await connectNats({ url: env.NATS_URL, name: 'authority-rebuild', logger });
  const keys = new Keys(env.HOLDFAST_KEY_PREFIX);
  try {
    let config;
    if (env.HOLDFAST_CONFIG) config = await loadConfigFile(env.HOLDFAST_CONFIG);
    else {
      const stored = await redis.get(keys.config);
      if (stored === null) throw new Error('no config: set HOLDFAST_CONFIG or apply one first');
      const parsed = parseConfig(JSON.parse(stored));
      if (!parsed.ok)
        throw new Error(`stored config does not validate: ${parsed.error.errors.join('; ')}`);
      config = parsed.value;
    }
    if (values.force) {
      const existing = await stateKeys(redis, keys);
      for (let i = 0; i < existing.length; i += 500) await redis.del(...existing.slice(i, i + 500));
      logger.warn({ deleted: existing.length }, 'deleted the budget state under the prefix');
    }
    const summary = await new Rebuilder({
      redis,
      nc,
      names: natsNames(env),
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
