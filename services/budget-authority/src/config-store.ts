import { readFile } from 'node:fs/promises';
import {
  compileConfig,
  configChanges,
  HoldfastConfigSchema,
  isEmptyDocument,
  mergeDeclared,
  parseConfig,
  type CompiledConfig,
} from '@holdfast/config';
import {
  CONFIG_CHANGES_LISTED,
  type ConfigApplyMode,
  type ConfigApplyReply,
  type ConfigChange,
  type ConfigGetReply,
  type DeclaredConfig,
} from '@holdfast/events';
import { Err, Ok, RpcError, type Logger, type Result } from '@holdfast/runtime';
import type { RedisClient } from './redis.js';
import { readDeclared, readFileRecord, type DeclaredRecord } from './declared.js';
import { SYSTEM_ORG, type Keys } from './keys.js';
import { writeApply } from './write-apply.js';

const EMPTY = compileConfig(HoldfastConfigSchema.parse({}));

export interface ApplyOptions {
  /** Apply only on top of this version (version_conflict otherwise). */
  expectedVersion?: number;
  /** See ConfigApplyMode: `edit` (default), `merge` or `replace`. */
  mode?: ConfigApplyMode;
  /** The config file the document was read from: recorded, so a restart skips it unchanged. */
  file?: string;
}

/** What an apply did (the config.apply reply). */
export type Applied = ConfigApplyReply;

/**
 * The applied configuration lives in Redis, so every replica serves the same one. A replica
 * caches it and reloads when the version moves (a NATS notice, or polling as a fallback).
 * The stored config is the one source of truth: the admin API edits it; the config file and
 * `holdfast apply` are declarative documents merged into it (see `apply`'s modes), so a
 * restart or a re-apply never silently drops what the admin API changed.
 */
export class ConfigStore {
  readonly #redis: RedisClient;
  readonly #keys: Keys;
  readonly #logger: Logger;
  readonly #clock: () => number;
  #config: CompiledConfig = EMPTY;
  #knownOrgs: string[] = [];
  #version = 0;
  /** The last declared record read, and the divergence last computed (see `snapshot`). */
  #declaredCache: DeclaredRecord | undefined;
  #divergence: { key: string; changes: ConfigChange[] } | undefined;
  /** The reload in progress: callers at the same moment share it (`refresh`). */
  #loading: Promise<boolean> | undefined;

  constructor(opts: { redis: RedisClient; keys: Keys; logger: Logger; clock: () => number }) {
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
    // The registry's node being down (a failover on Redis Cluster) must not stop the relay of
    // every org: the last list read stands in until it answers again.
    const known = await this.#redis.smembers(this.#keys.orgs).then(
      (list) => (this.#knownOrgs = list),
      () => this.#knownOrgs,
    );
    const configured = [...this.#config.tenants.values()].map((t) => t.org);
    return [...new Set([SYSTEM_ORG, ...configured, ...known])];
  }

  /**
   * Reloads from Redis when another replica applied a newer version. The document and its
   * version are read in one MGET: an apply landing between two separate reads would otherwise
   * be served as the old document under the new version (issue 11, item 5b).
   */
  refresh(): Promise<boolean> {
    // One at a time: a burst of admits from edges on a newer version (`atLeast`) reads and
    // parses the document once, not once each.
    this.#loading ??= this.#load().finally(() => (this.#loading = undefined));
    return this.#loading;
  }

  /**
   * Reloads until this copy is at `version` or later, if Redis has it: a reload already in
   * progress may have read the version before `version` was written, so one more is started
   * after it when it falls short.
   */
  async atLeast(version: number): Promise<void> {
    if (this.#version >= version) return;
    await this.refresh();
    if (this.#version < version) await this.refresh();
  }

  async #load(): Promise<boolean> {
    // The cheap check first: most calls (polling, config.get) find nothing new.
    const seen = Number((await this.#redis.get(this.#keys.configVersion)) ?? 0);
    if (seen <= this.#version) return false;
    const [text, stored] = await this.#redis.mget(this.#keys.config, this.#keys.configVersion);
    const version = Number(stored ?? 0);
    if (typeof text !== 'string' || version <= this.#version) return false;
    // The stored document: applied under the limits of its time (parseConfig's `limits`).
    const parsed = parseConfig(JSON.parse(text), 'stored config', { limits: false });
    if (!parsed.ok) {
      this.#logger.error(
        { errors: parsed.error.errors, version },
        'stored config no longer validates; keeping the old one',
      );
      return false;
    }
    this.#config = parsed.value;
    this.#version = version;
    this.#logger.info({ version: this.#version, hash: this.#config.hash }, 'config loaded');
    return true;
  }

  /**
   * Validates and applies a config document (see ApplyOptions and ConfigApplyMode). Nothing
   * changes when the result is the stored config. The write, the version bump, the declared
   * document and the config.changed event go in one script, which refuses when the version or
   * the declared document moved; then the apply is redone on top of the new state.
   */
  async apply(
    document: unknown,
    source: string,
    opts: ApplyOptions = {},
    attempt = 0,
  ): Promise<Result<Applied, RpcError>> {
    if ((opts.mode ?? 'edit') !== 'edit' && isEmptyDocument(document)) {
      const message =
        'the document is empty: as a declared document it would remove everything the last one declared. Send the whole config; to remove every tenant, say tenants: []';
      return Err(new RpcError({ code: 'invalid_config', message }));
    }
    const parsed = parseConfig(document);
    if (!parsed.ok) {
      return Err(new RpcError({ code: 'invalid_config', message: parsed.error.errors.join('; ') }));
    }
    const next = parsed.value;
    await this.refresh();
    // What this apply is decided and written against. A refresh may run while it waits on
    // Redis (a notice, the poll, an edge's config.get) and move the cache: the write is still
    // checked against the version read here, and a pinned version against that one.
    const base = { version: this.#version, config: this.#config };
    const { expectedVersion } = opts;
    if (expectedVersion !== undefined && expectedVersion !== base.version) {
      return Err(
        new RpcError({
          code: 'version_conflict',
          message: `the config is at version ${base.version}, not the expected ${expectedVersion}: read it again and reapply the change`,
        }),
      );
    }
    const mode = opts.mode ?? 'edit';
    const declared = mode === 'edit' ? undefined : await readDeclared(this.#redis, this.#keys);
    const target = this.#target(mode, next, declared?.record, base);
    if (!target.ok) return target;
    const { config, kept, overridden } = target.value;
    const written = await writeApply(this.#redis, this.#keys, {
      from: { version: base.version, hash: base.config.hash, declaredHash: declared?.hash },
      config,
      declared: mode !== 'edit' && declared?.hash !== next.hash ? next : undefined,
      file: opts.file,
      source,
      time: this.#clock(),
    });
    if (written === 'moved') {
      // Another apply (another replica's, or a concurrent one here) wrote in between: redo
      // this one on top of it. With an expected version, that answers a conflict.
      if (attempt >= 5) {
        return Err(new RpcError({ code: 'internal', message: 'config version kept moving' }));
      }
      return this.apply(document, source, opts, attempt + 1);
    }
    const changed = written.version !== base.version;
    if (changed) {
      // A refresh meanwhile may have loaded this version already (or a later one).
      if (written.version > this.#version) {
        this.#config = config;
        this.#version = written.version;
      }
      this.#logger.info(
        { version: written.version, hash: config.hash, source, tenants: config.tenants.size },
        'config applied',
      );
    }
    if (kept.length > 0) {
      this.#logger.info(
        { source, kept: kept.slice(0, 50) },
        'kept changes made through the admin API',
      );
    }
    if (overridden.length > 0) {
      this.#logger.warn(
        { source, overridden: overridden.slice(0, 50) },
        'the document overrides changes made through the admin API',
      );
    }
    return Ok({
      version: written.version,
      hash: config.hash,
      changed,
      kept: kept.slice(0, CONFIG_CHANGES_LISTED),
      overridden: overridden.slice(0, CONFIG_CHANGES_LISTED),
      keptCount: kept.length,
      overriddenCount: overridden.length,
    });
  }

  /** The config to store for a document, by mode, with what it keeps and undoes. */
  #target(
    mode: ConfigApplyMode,
    next: CompiledConfig,
    record: DeclaredRecord | undefined,
    live: { version: number; config: CompiledConfig },
  ): Result<
    { config: CompiledConfig; kept: ConfigChange[]; overridden: ConfigChange[] },
    RpcError
  > {
    if (mode === 'edit' || live.version === 0)
      return Ok({ config: next, kept: [], overridden: [] });
    // No declared document recorded (a store from before it was kept): the stored config is
    // taken as the last one declared, so the document applies whole, as it always did.
    const base = record?.document ?? live.config.raw;
    const merged = mergeDeclared(base, live.config.raw, next.raw);
    if (mode === 'replace') {
      return Ok({ config: next, kept: [], overridden: [...merged.kept, ...merged.overridden] });
    }
    const parsed = parseConfig(merged.document);
    if (!parsed.ok) {
      return Err(
        new RpcError({
          code: 'invalid_config',
          message: `the document is valid, but not once merged with the changes made through the admin API since the last one (${merged.kept.map((c) => c.path).join(', ')}): ${parsed.error.errors.join('; ')}. Make those changes part of the document, or apply it with replace to drop them`,
        }),
      );
    }
    return Ok({ config: parsed.value, kept: merged.kept, overridden: merged.overridden });
  }

  /**
   * Applies the config file (at start, when it changes, on SIGHUP) as a declarative document,
   * unless it is the file last applied: a restart then serves the stored config as it is,
   * with whatever the admin API changed since.
   */
  async applyFile(
    path: string,
  ): Promise<
    Result<(Applied & { skipped: false }) | { skipped: true; appliedAt: number }, RpcError>
  > {
    const parsed = parseConfig(await readFile(path, 'utf8'));
    if (!parsed.ok) {
      return Err(new RpcError({ code: 'invalid_config', message: parsed.error.errors.join('; ') }));
    }
    await this.refresh();
    const last = await readFileRecord(this.#redis, this.#keys);
    if (last?.hash === parsed.value.hash && this.#version > 0) {
      return Ok({ skipped: true, appliedAt: last.version });
    }
    const r = await this.apply(parsed.value.raw, `file:${path}`, { mode: 'merge', file: path });
    return r.ok ? Ok({ ...r.value, skipped: false }) : r;
  }

  /**
   * What config.get answers: the stored config, the last declared document, and what the admin
   * API changed since it. A declared document newer than this replica's cache means an apply
   * landed in between: the cache is refreshed once more, so the two belong together. Edges poll
   * config.get, so the declared document is read again only when its hash moved, and the
   * divergence is computed once per (version, declared document).
   */
  async snapshot(): Promise<ConfigGetReply> {
    await this.refresh();
    let declared = await this.#declared();
    if (declared && declared.version > this.#version) {
      await this.refresh();
      declared = await this.#declared();
    }
    const key = `${this.#version}:${declared?.hash ?? ''}`;
    if (this.#divergence?.key !== key) {
      const changes = declared ? configChanges(declared.document, this.#config.raw) : [];
      this.#divergence = { key, changes };
    }
    const { document: _, ...record } = declared ?? { document: undefined };
    return {
      version: this.#version,
      hash: this.#config.hash,
      config: this.#config.raw,
      declared: declared ? (record as DeclaredConfig) : null,
      // Listed up to a bound: the whole list beside a large document outgrew one NATS message.
      divergence: this.#divergence.changes.slice(0, CONFIG_CHANGES_LISTED),
      divergenceCount: this.#divergence.changes.length,
    };
  }

  /** The declared record, read whole only when its hash is not the one cached. */
  async #declared(): Promise<DeclaredRecord | undefined> {
    const hash = (await this.#redis.hget(this.#keys.configDeclared, 'hash')) ?? '';
    if (hash === '') return undefined;
    if (this.#declaredCache?.hash !== hash) {
      this.#declaredCache = (await readDeclared(this.#redis, this.#keys)).record;
    }
    return this.#declaredCache;
  }
}
