import { parseConfig, type CompiledConfig } from '@holdfast/config';
import type { NatsNames } from '@holdfast/events';
import { every, type AuthorityClient, type Logger, type Periodic } from '@holdfast/runtime';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';

export interface ConfigSnapshotOptions {
  authority: AuthorityClient;
  nc: NatsConnection;
  names: NatsNames;
  logger: Logger;
  pollMs: number;
  /** Called with each config loaded (e.g. to load the encodings its models use). */
  onLoad?: (config: CompiledConfig) => void;
}

/**
 * The edge's copy of the applied configuration. The authority owns it; the edge fetches it at
 * start, again on the authority's `config.changed` notice, and by polling in case a notice is
 * lost. Until the first fetch succeeds the edge is not ready.
 */
export class ConfigSnapshot {
  readonly #o: ConfigSnapshotOptions;
  #current: CompiledConfig | undefined;
  #version = -1;
  /** The authority's hash of the config loaded. */
  #hash = '';
  #sub: Subscription | undefined;
  #poll: Periodic | undefined;
  #retry: NodeJS.Timeout | undefined;
  #stopped = false;
  #refreshing: Promise<boolean> | undefined;

  constructor(opts: ConfigSnapshotOptions) {
    this.#o = opts;
  }

  get current(): CompiledConfig | undefined {
    return this.#current;
  }

  get version(): number {
    return this.#version;
  }

  /** Subscribes to notices, starts polling and tries a first fetch (without failing on it). */
  async start(): Promise<void> {
    const { nc, names, logger } = this.#o;
    this.#sub = nc.subscribe(`${names.authorityPrefix}.config.changed`, {
      callback: () => void this.refresh(),
    });
    this.#poll = every(this.#o.pollMs, () => this.refresh(), {
      logger,
      failed: 'config fetch failed',
    });
    if (!(await this.refresh())) {
      logger.warn('no config from the authority yet; not ready');
      this.#untilLoaded();
    }
  }

  /** Until a first config arrives, ask often (not ready means every call is refused). */
  #untilLoaded(): void {
    this.#retry = setTimeout(
      () => {
        void this.refresh().then((loaded) => {
          if (!loaded && !this.#stopped) this.#untilLoaded();
        });
      },
      Math.min(500, this.#o.pollMs),
    );
    this.#retry.unref();
  }

  /** Fetches the config when the authority has a newer version; true when one is loaded. */
  refresh(): Promise<boolean> {
    this.#refreshing ??= this.#fetch().finally(() => (this.#refreshing = undefined));
    return this.#refreshing;
  }

  /** Consecutive answers older than the version loaded. */
  #older = 0;

  async #fetch(): Promise<boolean> {
    const { authority, logger } = this.#o;
    const reply = await authority.configGet();
    if (!reply.ok) {
      logger.warn({ code: reply.error.code }, 'config fetch failed');
      return this.#current !== undefined;
    }
    const { version, hash, config } = reply.value;
    // Version 0: nothing was ever applied, so there is nothing to serve. Versions move forward:
    // an older answer (a replica that has not reloaded yet) is ignored, unless the authority
    // keeps answering it (its Redis was reset and the config applied anew). The same version
    // with another document is loaded: a Redis reset and as many applies since.
    this.#older = version < this.#version ? this.#older + 1 : 0;
    if (version === 0 || (version === this.#version && hash === this.#hash)) {
      return this.#current !== undefined;
    }
    if (version < this.#version && this.#older < 3) return this.#current !== undefined;
    this.#older = 0;
    const parsed = parseConfig(config, 'stored config', { limits: false });
    if (!parsed.ok) {
      logger.error(
        { version, errors: parsed.error.errors },
        'authority config rejected; keeping ours',
      );
      return this.#current !== undefined;
    }
    this.#current = parsed.value;
    this.#version = version;
    this.#hash = hash;
    logger.info({ version, hash }, 'config loaded');
    this.#o.onLoad?.(parsed.value);
    return true;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#poll?.stop();
    clearTimeout(this.#retry);
    await this.#sub?.drain().catch(() => undefined);
    await this.#refreshing?.catch(() => undefined);
  }
}
