import type { Logger } from '@holdfast/runtime';
import type { Keys } from './keys.js';
import { isCluster, type RedisClient } from './redis.js';

/** Renames each old key to its new name unless the new one exists; returns how many moved. */
const MOVE = `
local moved = 0
for i = 1, #KEYS, 2 do
  if redis.call('EXISTS', KEYS[i]) == 1 and redis.call('EXISTS', KEYS[i + 1]) == 0 then
    redis.call('RENAME', KEYS[i], KEYS[i + 1])
    moved = moved + 1
  end
end
return moved`;

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
  const moved = Number(await redis.eval(MOVE, pairs.length, ...pairs));
  if (moved > 0) logger.info({ moved }, 'moved the config keys to their {_system}-tagged names');
}
