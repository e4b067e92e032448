import { randomUUID } from 'node:crypto';
import {
  parseConfig,
  type CompiledConfig,
  compileConfig,
  HoldfastConfigSchema,
} from '@holdfast/config';
import { Err, Ok, RpcError, type Result } from '@holdfast/runtime';
import type { Redis } from 'ioredis';
import type { Logger } from '@holdfast/runtime';
import { SYSTEM_ORG, type Keys } from './keys.js';
import { encodeOutboxFields } from './outbox.js';

const EMPTY = compileConfig(HoldfastConfigSchema.parse({}));

/**
 * KEYS: version, config, system outbox, orgs set. ARGV: expected version, document, event
 * fields (JSON array), orgs (JSON array). Writes only if the version is still the expected one.
 */
const APPLY_SCRIPT = `
if (redis.call('GET', KEYS[1]) or '0') ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('INCR', KEYS[1])
redis.call('XADD', KEYS[3], '*', unpack(cjson.decode(ARGV[3])))
local orgs = cjson.decode(ARGV[4])
if #orgs > 0 then redis.call('SADD', KEYS[4], unpack(orgs)) end
return 1`;

/**
 * The applied configuration lives in Redis, so every replica serves the same one. A replica
 * caches it and reloads when the version moves (a NATS notice, or polling as a fallback).
 */
export class ConfigStore {
  readonly #redis: Redis;
  readonly #keys: Keys;
  readonly #logger: Logger;
  readonly #clock: () => number;
  #config: CompiledConfig = EMPTY;
  #version = 0;

  constructor(opts: { redis: Redis; keys: Keys; logger: Logger; clock: () => number }) {
    this.#redis = opts.redis;
    this.#keys = opts.keys;
    this.#logger = opts.logger;
    this.#clock = opts.clock;
  }

  get current(): CompiledConfig {
    return this.#config;
  }
  get version(): number {
    return this.#version;
  }

  /** Every org whose outbox may hold events: configured ones, past ones, and the system org. */
  async orgs(): Promise<string[]> {
    const known = await this.#redis.smembers(this.#keys.orgs);
    const configured = [...this.#config.tenants.values()].map((t) => t.org);
    return [...new Set([SYSTEM_ORG, ...configured, ...known])];
  }

  /**
   * Reloads from Redis when another replica applied a newer version. The document and its
   * version are read in one MGET: an apply landing between two separate reads would otherwise
   * be served as the old document under the new version (issue 11, item 5b).
   */
  async refresh(): Promise<boolean> {
    // The cheap check first: most calls (polling, config.get) find nothing new.
    const seen = Number((await this.#redis.get(this.#keys.configVersion)) ?? 0);
    if (seen <= this.#version) return false;
    const [text, stored] = await this.#redis.mget(this.#keys.config, this.#keys.configVersion);
    const version = Number(stored ?? 0);
    if (typeof text !== 'string' || version <= this.#version) return false;
    const parsed = parseConfig(JSON.parse(text));
    if (!parsed.ok) {
      this.#logger.error(
        { errors: parsed.errors, version },
        'stored config no longer validates; keeping the old one',
      );
      return false;
    }
    this.#config = parsed.config;
    this.#version = version;
    this.#logger.info({ version: this.#version, hash: this.#config.hash }, 'config loaded');
    return true;
  }

  /**
   * Validates and applies a config document. Unchanged documents change nothing. The write,
   * the version bump and the config.changed event go in one MULTI. With `expectedVersion`, a
   * config that moved past that version is refused (`version_conflict`), even when unchanged.
   */
  async apply(
    document: unknown,
    source: string,
    expectedVersion?: number,
    attempt = 0,
  ): Promise<Result<{ version: number; hash: string; changed: boolean }, RpcError>> {
    const parsed = parseConfig(document);
    if (!parsed.ok) {
      return Err(new RpcError({ code: 'invalid_config', message: parsed.errors.join('; ') }));
    }
    const cfg = parsed.config;
    await this.refresh();
    if (expectedVersion !== undefined && expectedVersion !== this.#version) {
      return Err(
        new RpcError({
          code: 'version_conflict',
          message: `the config is at version ${this.#version}, not the expected ${expectedVersion}: read it again and reapply the change`,
        }),
      );
    }
    if (cfg.hash === this.#config.hash && this.#version > 0) {
      return Ok({ version: this.#version, hash: cfg.hash, changed: false });
    }
    const orgs = [...new Set([...cfg.tenants.values()].map((t) => t.org))];
    const version = this.#version + 1;
    const event = encodeOutboxFields({
      type: 'config.changed',
      id: randomUUID(),
      time: this.#clock(),
      tenant: '_system',
      org: '_system',
      version,
      hash: cfg.hash,
      tenants: cfg.tenants.size,
      source: source.slice(0, 200),
    });
    const applied = await this.#redis.eval(
      APPLY_SCRIPT,
      4,
      this.#keys.configVersion,
      this.#keys.config,
      this.#keys.outbox(SYSTEM_ORG),
      this.#keys.orgs,
      String(this.#version),
      JSON.stringify(cfg.raw),
      JSON.stringify(event),
      JSON.stringify(orgs),
    );
    if (applied !== 1) {
      // Another apply (another replica's, or a concurrent one here) wrote a version in between:
      // reload and try again on top of it. With an expected version, that answers a conflict.
      await this.refresh();
      if (attempt >= 5) {
        return Err(new RpcError({ code: 'internal', message: 'config version kept moving' }));
      }
      return this.apply(document, source, expectedVersion, attempt + 1);
    }
    this.#config = cfg;
    this.#version = version;
    this.#logger.info(
      { version, hash: cfg.hash, source, tenants: cfg.tenants.size },
      'config applied',
    );
    return Ok({ version, hash: cfg.hash, changed: true });
  }
}
