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
