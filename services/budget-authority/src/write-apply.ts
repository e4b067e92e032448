import { randomUUID } from 'node:crypto';
import type { CompiledConfig } from '@holdfast/config';
import type { RedisClient } from './redis.js';
import { SYSTEM_ORG, type Keys } from './keys.js';
import { encodeOutboxFields } from './outbox.js';
import { runApply } from './scripts.js';

export interface ApplyWrite {
  /**
   * What the caller read: the write happens only if it is still so. No declared hash (an
   * edit): the declared document is neither read nor checked.
   */
  from: { version: number; hash: string; declaredHash: string | undefined };
  /** The config to store (written, with a new version and event, only if its hash differs). */
  config: CompiledConfig;
  /** The new declared document, or undefined to leave the recorded one. */
  declared: CompiledConfig | undefined;
  /** The config file the declared document came from. */
  file: string | undefined;
  source: string;
  time: number;
}

/**
 * One atomic write of an apply: the config, its version and config.changed event, the declared
 * document and the file record, each only when it changes. `moved` when the version or the
 * declared document is no longer what the caller read; else the version after the write.
 */
export async function writeApply(
  redis: RedisClient,
  keys: Keys,
  w: ApplyWrite,
): Promise<{ version: number } | 'moved'> {
  const configChanges = !(w.config.hash === w.from.hash && w.from.version > 0);
  const version = configChanges ? w.from.version + 1 : w.from.version;
  const iso = new Date(w.time).toISOString();
  const declared = w.declared && {
    version,
    hash: w.declared.hash,
    source: w.source.slice(0, 200),
    time: iso,
    document: w.declared.raw,
  };
  const file = w.file && {
    path: w.file,
    hash: w.declared?.hash ?? w.config.hash,
    version,
    time: iso,
  };
  if (!configChanges && !declared && !file) return { version };
  const event = encodeOutboxFields({
    type: 'config.changed',
    id: randomUUID(),
    time: w.time,
    tenant: '_system',
    org: '_system',
    version,
    hash: w.config.hash,
    tenants: w.config.tenants.size,
    source: w.source.slice(0, 200),
  });
  const orgs = [...new Set([...w.config.tenants.values()].map((t) => t.org))];
  const scriptKeys = [
    keys.configVersion,
    keys.config,
    keys.outbox(SYSTEM_ORG),
    keys.orgs,
    keys.configDeclared,
    keys.configFile,
  ];
  const args = [
    String(w.from.version),
    w.from.declaredHash ?? '*',
    configChanges ? JSON.stringify(w.config.raw) : '',
    JSON.stringify(event),
    JSON.stringify(orgs),
    declared ? declared.hash : '',
    declared ? JSON.stringify(declared) : '',
    file ? JSON.stringify(file) : '',
  ];
  const result = await runApply(redis, scriptKeys, args);
  return Number(result) < 0 ? 'moved' : { version: Number(result) };
}
