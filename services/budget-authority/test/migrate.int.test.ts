import { createLogger } from '@holdfast/runtime';
import { infraTest as test } from '@holdfast/testkit';
import { expect } from 'vitest';
import { Keys } from '../src/keys.js';
import { migrateGlobalKeys } from '../src/migrate.js';
import { createRedis } from '../src/redis.js';

test("an older authority's untagged config keys move to their {_system} names; a key already there is kept", async ({
  redisUrl,
  redis,
  iso,
}) => {
  const keys = new Keys(iso.keyPrefix);
  const p = iso.keyPrefix;
  await redis.set(`${p}:config`, '{"old":true}');
  await redis.set(`${p}:config:version`, '7');
  await redis.sadd(`${p}:orgs`, 'acme', 'globex');
  // Already moved (a replica of the new version started first): not overwritten.
  await redis.set(`${p}:config:file`, 'old file');
  await redis.set(keys.configFile, 'new file');

  const client = createRedis(redisUrl);
  await client.connect();
  try {
    // Run alone, before any authority: the scripts library is loaded by the call itself.
    await migrateGlobalKeys(client, keys, createLogger({ name: 'migrate-test', level: 'silent' }));
  } finally {
    client.disconnect();
  }
  expect(await redis.get(keys.config)).toBe('{"old":true}');
  expect(await redis.get(keys.configVersion)).toBe('7');
  expect((await redis.smembers(keys.orgs)).sort()).toEqual(['acme', 'globex']);
  expect(await redis.get(keys.configFile)).toBe('new file');
  expect(await redis.exists(`${p}:config`, `${p}:config:version`, `${p}:orgs`)).toBe(0);
  expect(await redis.get(`${p}:config:file`)).toBe('old file');
});
