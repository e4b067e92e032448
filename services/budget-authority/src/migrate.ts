import type { Logger } from '@holdfast/runtime';
import type { Keys } from './keys.js';
import { isCluster, type RedisClient } from './redis.js';
import { moveKeys } from './scripts.js';

/**
 * Moves the config keys and org registry of an older authority (untagged names, see keys.ts)
 * to their `{_system}`-tagged names, in one script. Only a single Redis can hold them: on Redis
 * Cluster the untagged apply script never ran (its keys cross slots).
 */
export async function migrateGlobalKeys(
  redis: RedisClient,
  keys: Keys,
  logger: Logger,
): Promise<void> {
  if (isCluster(redis)) return;
  const pairs = keys.legacyGlobalKeys.flat();
  const moved = Number(await moveKeys(redis, pairs));
  if (moved > 0) logger.info({ moved }, 'moved the config keys to their {_system}-tagged names');
}
