import { DeclaredConfig } from '@holdfast/events';
import type { RedisClient } from './redis.js';
import { z } from 'zod';
import type { Keys } from './keys.js';

/**
 * The records that make the stored config the one source of truth while files and
 * `holdfast apply` stay declarative (docs/configuration.md, "Where the config lives"):
 * the last declared document, the base of the next three-way merge, and the hash of the
 * config file last applied, so a restart applies the file only when it changed.
 */

export const DeclaredRecord = DeclaredConfig.extend({ document: z.unknown() });
export type DeclaredRecord = z.infer<typeof DeclaredRecord>;

export const FileRecord = z.object({
  path: z.string(),
  hash: z.string(),
  version: z.int().min(0),
  time: z.iso.datetime(),
});
export type FileRecord = z.infer<typeof FileRecord>;

/**
 * KEYS: version, config, system outbox, orgs set, declared (hash), file record.
 * ARGV: expected version, expected declared hash ('' = none yet, '*' = not checked: an edit),
 * document ('' = unchanged),
 * event fields (JSON array), orgs (JSON array), declared hash and record ('' = unchanged),
 * file record ('' = unchanged).
 * Writes only if the version and the declared document are still the ones the caller read;
 * returns the version after the write, or -1 when something moved.
 */
export const APPLY_SCRIPT = `
if (redis.call('GET', KEYS[1]) or '0') ~= ARGV[1] then return -1 end
if ARGV[2] ~= '*' and (redis.call('HGET', KEYS[5], 'hash') or '') ~= ARGV[2] then return -1 end
local version = tonumber(ARGV[1])
if ARGV[3] ~= '' then
  redis.call('SET', KEYS[2], ARGV[3])
  version = redis.call('INCR', KEYS[1])
  redis.call('XADD', KEYS[3], '*', unpack(cjson.decode(ARGV[4])))
  local orgs = cjson.decode(ARGV[5])
  if #orgs > 0 then redis.call('SADD', KEYS[4], unpack(orgs)) end
end
if ARGV[6] ~= '' then redis.call('HSET', KEYS[5], 'hash', ARGV[6], 'record', ARGV[7]) end
if ARGV[8] ~= '' then redis.call('SET', KEYS[6], ARGV[8]) end
return version`;

function parsed<T>(schema: z.ZodType<T>, text: string | null | undefined): T | undefined {
  if (typeof text !== 'string') return undefined;
  try {
    const r = schema.safeParse(JSON.parse(text));
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
}

/** The last declared document and its hash (the hash alone is what the apply script checks). */
export async function readDeclared(
  redis: RedisClient,
  keys: Keys,
): Promise<{ hash: string; record: DeclaredRecord | undefined }> {
  const [hash, record] = await redis.hmget(keys.configDeclared, 'hash', 'record');
  return { hash: hash ?? '', record: parsed(DeclaredRecord, record) };
}

export async function readFileRecord(
  redis: RedisClient,
  keys: Keys,
): Promise<FileRecord | undefined> {
  return parsed(FileRecord, await redis.get(keys.configFile));
}
