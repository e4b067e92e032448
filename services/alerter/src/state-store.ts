import { jetstream, JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import { Kvm, type KV, type KvWatchEntry } from '@nats-io/kv';
import { JETSTREAM_OP_TIMEOUT_MS, warnOnReplicas, type StreamOptions } from '@holdfast/runtime';
import type { QueuedIterator } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import type { z } from 'zod';

export interface Versioned<T> {
  value: T;
  /** KV revision to compare-and-set against; 0 when the key has never been written. */
  revision: number;
}

/** How long a mirrored value is trusted without news from the watch or the server. */
const MIRROR_TRUST_MS = 2_000;

interface Mirrored {
  revision: number;
  /** The stored JSON, or undefined for a missing/deleted value. */
  raw: unknown;
  confirmedAt: number;
  /**
   * `raw` as last decoded, with the schema and empty value it was decoded with: a record is
   * decoded once per revision, not on every event that reads it (issue 14: zod's decode was
   * ~6 µs of an event's ~69). Shared by every reader of that revision; the callers
   * (window-tracker.ts) build new records and never change one they read.
   */
  decoded?: { schema: z.ZodType; empty: unknown; versioned: Versioned<unknown> };
}

/**
 * Shared, durable state of every alerter replica: a NATS KV bucket (works on NATS 2.9) used
 * only through compare-and-set on the key's revision, so two replicas that race on the same
 * window cannot both win.
 *
 * Reads of mirrored keys come from a local copy kept current by a KV watch, so the common case
 * (an event that changes nothing) costs no round trip. A stale copy can only make a write
 * fail its compare-and-set (the caller then reads `fresh`), or delay a decision that needs no
 * write by at most the watch's lag; entries older than MIRROR_TRUST_MS are read again anyway,
 * in case the watch itself stalled.
 */
export class StateStore {
  readonly #kv: KV;
  readonly #mirror = new Map<string, Mirrored>();
  #mirrorPrefix: string | undefined;
  #watch: QueuedIterator<KvWatchEntry> | undefined;

  private constructor(kv: KV) {
    this.#kv = kv;
  }

  /**
   * Creates the bucket with `opts.replicas`; an existing bucket keeps its replicas. Reads and
   * writes then wait JETSTREAM_OP_TIMEOUT_MS at most (an event's handling fails and comes back
   * instead of waiting out the client's 5 s for a server that was killed).
   */
  static async open(
    nc: NatsConnection,
    bucket: string,
    opts: StreamOptions = {},
  ): Promise<StateStore> {
    const replicas = opts.replicas ?? 1;
    await new Kvm(nc).create(bucket, { history: 1, replicas });
    const kv = await new Kvm(jetstream(nc, { timeout: JETSTREAM_OP_TIMEOUT_MS })).open(bucket);
    const status = await kv.status();
    warnOnReplicas(opts.logger, status.streamInfo.config.name, status.replicas, replicas);
    return new StateStore(kv);
  }

  /** Keeps a local copy of every key starting with `prefix` (e.g. `win.`). */
  async mirror(prefix: string): Promise<void> {
    this.#mirrorPrefix = prefix;
    const watch = await this.#kv.watch({ key: `${prefix}>` });
    this.#watch = watch;
    void (async () => {
      for await (const e of watch) {
        const raw = e.operation === 'PUT' && e.length > 0 ? safeJson(e) : undefined;
        this.#remember(e.key, e.revision, raw);
      }
    })();
  }

  stop(): void {
    this.#watch?.stop();
  }

  /**
   * Reads a key; a missing, deleted or unreadable value gives `empty` at its revision.
   * `fresh` skips the local copy (after a lost compare-and-set).
   */
  async read<S extends z.ZodType>(
    key: string,
    schema: S,
    empty: z.output<S>,
    opts: { fresh?: boolean } = {},
  ): Promise<Versioned<z.output<S>>> {
    if (!opts.fresh) {
      const local = this.peek(key, schema, empty);
      if (local) return local;
    }
    const entry = await this.#kv.get(key);
    if (!entry) {
      // Most windows never fire anything: remember that too, so they cost no round trip.
      this.#remember(key, 0, undefined);
      return { value: empty, revision: 0 };
    }
    const known = this.#mirror.get(key);
    if (known?.revision === entry.revision) {
      known.confirmedAt = Date.now();
      return decoded(known, schema, empty);
    }
    const raw = entry.operation === 'PUT' && entry.length > 0 ? safeJson(entry) : undefined;
    this.#remember(key, entry.revision, raw);
    return decode(schema, empty, raw, entry.revision);
  }

  /**
   * What `read` answers from the local copy, at once: the mirrored value when the copy is
   * trusted, else undefined (the caller then reads). The value is the mirror's own: read it,
   * do not change it.
   */
  peek<S extends z.ZodType>(
    key: string,
    schema: S,
    empty: z.output<S>,
  ): Versioned<z.output<S>> | undefined {
    const local = this.#mirror.get(key);
    if (!local || Date.now() - local.confirmedAt >= MIRROR_TRUST_MS) return undefined;
    return decoded(local, schema, empty);
  }

  #remember(key: string, revision: number, raw: unknown): void {
    if (this.#mirrorPrefix === undefined || !key.startsWith(this.#mirrorPrefix)) return;
    const known = this.#mirror.get(key);
    if (known && known.revision > revision) return;
    if (known?.revision === revision) {
      // The same revision again (the watch's copy of our own write, a read): the same record.
      known.confirmedAt = Date.now();
      return;
    }
    this.#mirror.set(key, { revision, raw, confirmedAt: Date.now() });
  }

  /**
   * Writes `value` if the key is still at `revision`. Returns the new revision, or undefined
   * when another writer got there first (the caller re-reads and decides again).
   */
  async compareAndSet(key: string, value: unknown, revision: number): Promise<number | undefined> {
    const data = JSON.stringify(value);
    try {
      const next =
        revision === 0
          ? await this.#kv.create(key, data)
          : await this.#kv.update(key, data, revision);
      this.#remember(key, next, JSON.parse(data));
      return next;
    } catch (err) {
      if (
        err instanceof JetStreamApiError &&
        err.code === JetStreamApiCodes.StreamWrongLastSequence
      ) {
        return undefined;
      }
      throw err;
    }
  }
}

function safeJson(e: { json<T>(): T }): unknown {
  try {
    return e.json<unknown>();
  } catch {
    return undefined;
  }
}

/** A mirrored record's decode with `schema`, kept with the entry until its next revision. */
function decoded<S extends z.ZodType>(
  local: Mirrored,
  schema: S,
  empty: z.output<S>,
): Versioned<z.output<S>> {
  const kept = local.decoded;
  if (kept?.schema === schema && kept.empty === empty) {
    return kept.versioned as Versioned<z.output<S>>;
  }
  const versioned = decode(schema, empty, local.raw, local.revision);
  local.decoded = { schema, empty, versioned };
  return versioned;
}

function decode<S extends z.ZodType>(
  schema: S,
  empty: z.output<S>,
  raw: unknown,
  revision: number,
): Versioned<z.output<S>> {
  if (raw === undefined) return { value: empty, revision };
  const parsed = schema.safeParse(raw);
  return { value: parsed.success ? parsed.data : empty, revision };
}

/** KV keys: `win.<level>.<budget>`, `burn.<level>.<budget>`, `susp.<tenant>`. */
export const stateKeys = {
  window: (level: string, budget: string) => `win.${level}.${budget}`,
  burn: (level: string, budget: string) => `burn.${level}.${budget}`,
  suspension: (tenant: string) => `susp.${tenant}`,
} as const;

/**
 * Retries a compare-and-set step until it applies or decides nothing is to be done, at once:
 * a conflict means another replica just wrote, so the next read sees the new revision. An
 * error is not a conflict: it goes to the caller at once. A plain loop (no backoff to wait
 * for): every event runs one per window, and the first attempt nearly always decides.
 */
export async function casLoop<T>(
  step: () => Promise<{ done: true; result: T } | { done: false }>,
  what: string,
  maxAttempts = 50,
): Promise<T> {
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const r = await step();
    if (r.done) return r.result;
  }
  throw new Error(`${what}: still conflicting after ${maxAttempts} compare-and-set attempts`);
}
