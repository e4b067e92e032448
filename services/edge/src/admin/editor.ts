import { setTimeout as sleep } from 'node:timers/promises';
import { HoldfastConfigShape, type HoldfastConfig } from '@holdfast/config';
import type {
  ConfigApplyMode,
  ConfigApplyReply,
  ConfigChange,
  DeclaredConfig,
} from '@holdfast/events';
import { Err, Ok, type AuthorityClient, type Logger, type Result } from '@holdfast/runtime';
import { fromAuthority } from '../authority/errors.js';
import type { ConfigSnapshot } from '../authority/config-snapshot.js';
import { EdgeError } from '../errors.js';

/**
 * What an apply did: the config version now stored, its hash, whether anything changed, and
 * (declarative applies) the admin API's changes it kept or overrode.
 */
export type Applied = ConfigApplyReply;

/** The stored config, the last declared document, and what the admin API changed since. */
export interface Stored {
  version: number;
  hash: string;
  config: HoldfastConfig;
  declared: DeclaredConfig | null;
  /** The first CONFIG_CHANGES_LISTED of them; `divergenceCount` counts them all. */
  divergence: ConfigChange[];
  divergenceCount: number;
}

export interface EditOptions {
  /** Recorded in the config.changed event (`admin:PUT /admin/...`). */
  source: string;
  /** Apply only on top of this version (409 version_conflict otherwise, never retried). */
  expectedVersion?: number;
}

export interface ApplyOptions extends EditOptions {
  /** `merge` (a declarative document, the default of PUT /admin/config) or `replace`. */
  mode: Exclude<ConfigApplyMode, 'edit'>;
}

/** A change to a copy of the document: the value to answer with, or why it cannot be made. */
export type Change<T> = (doc: HoldfastConfig) => Result<T, EdgeError>;

/** Attempts of one edit when other writers keep moving the version underneath it. */
const ATTEMPTS = 5;
/** How long an apply waits for this edge's own snapshot to load the new version. */
const CATCH_UP_MS = 3_000;

/**
 * Edits the configuration the authority owns, always whole-document: read (`config.get`),
 * change a copy, apply it with the version it was read at (`config.apply` + `expectedVersion`).
 * A concurrent writer makes the apply fail with version_conflict instead of being overwritten;
 * the edit is then redone on the new document, unless the caller pinned a version itself. The
 * authority validates every document, so no edit can store an invalid config.
 */
export class ConfigEditor {
  readonly #authority: AuthorityClient;
  readonly #snapshot: ConfigSnapshot;
  readonly #logger: Logger;
  #queue: Promise<void> = Promise.resolve();

  constructor(opts: { authority: AuthorityClient; snapshot: ConfigSnapshot; logger: Logger }) {
    this.#authority = opts.authority;
    this.#snapshot = opts.snapshot;
    this.#logger = opts.logger;
  }

  async read(): Promise<Result<Stored, EdgeError>> {
    const r = await this.#authority.configGet();
    if (!r.ok) return Err(fromAuthority(r.error));
    const parsed = HoldfastConfigShape.safeParse(r.value.config);
    if (!parsed.success) {
      return Err(
        new EdgeError({ code: 'internal', message: 'the authority sent an invalid config' }),
      );
    }
    const { version, hash, declared, divergence } = r.value;
    const divergenceCount = r.value.divergenceCount ?? divergence.length;
    return Ok({ version, hash, config: parsed.data, declared, divergence, divergenceCount });
  }

  /**
   * Applies a whole document (YAML text or an object): merged as a declarative document, or
   * replacing the stored config (`o.mode`), or as the result of an edit (no mode).
   */
  async apply(
    document: string | Record<string, unknown>,
    o: EditOptions & { mode?: ApplyOptions['mode'] },
  ): Promise<Result<Applied, EdgeError>> {
    const r = await this.#authority.configApply({
      document,
      source: o.source.slice(0, 200),
      ...(o.mode ? { mode: o.mode } : {}),
      ...(o.expectedVersion === undefined ? {} : { expectedVersion: o.expectedVersion }),
    });
    if (!r.ok) return Err(fromAuthority(r.error));
    if (r.value.changed) await this.#catchUp(r.value.version);
    return Ok(r.value);
  }

  /**
   * Read-modify-write of the document; see the class comment. Edits through this edge run one
   * at a time (they would only conflict with each other); other edges' are caught by version.
   */
  edit<T>(
    change: Change<T>,
    o: EditOptions,
  ): Promise<Result<{ value: T; config: Applied }, EdgeError>> {
    const run = this.#queue.then(() => this.#edit(change, o));
    this.#queue = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  async #edit<T>(
    change: Change<T>,
    o: EditOptions,
  ): Promise<Result<{ value: T; config: Applied }, EdgeError>> {
    for (let attempt = 1; ; attempt++) {
      const current = await this.read();
      if (!current.ok) return current;
      const { version, config } = current.value;
      if (o.expectedVersion !== undefined && o.expectedVersion !== version) {
        return Err(conflict(version, o.expectedVersion));
      }
      const doc = structuredClone(config);
      const changed = change(doc);
      if (!changed.ok) return changed;
      const applied = await this.apply(doc, { source: o.source, expectedVersion: version });
      if (applied.ok) return Ok({ value: changed.value, config: applied.value });
      const retry = applied.error.code === 'version_conflict' && o.expectedVersion === undefined;
      if (!retry || attempt >= ATTEMPTS) return applied;
      this.#logger.debug({ attempt, source: o.source }, 'config moved during an edit; redoing it');
      // Another edge edits too: let it finish before reading again (jittered, a few ms).
      await sleep(Math.random() * 10 * attempt);
    }
  }

  /**
   * Waits (briefly) until this edge serves the version just applied, so a key created here
   * works in the very next request. Other edges follow on the authority's config.changed notice.
   */
  async #catchUp(version: number): Promise<void> {
    const deadline = Date.now() + CATCH_UP_MS;
    while (this.#snapshot.version < version) {
      if (Date.now() > deadline) {
        this.#logger.warn(
          { version, serving: this.#snapshot.version },
          'config applied but not loaded yet',
        );
        return;
      }
      await this.#snapshot.refresh();
      if (this.#snapshot.version < version) await sleep(20);
    }
  }
}

function conflict(version: number, expected: number): EdgeError {
  return new EdgeError({
    code: 'version_conflict',
    message: `Conflict: the config is at version ${version}, not the expected ${expected}: read it again and reapply the change.`,
  });
}
