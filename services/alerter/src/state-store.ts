import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { z } from 'zod';

export interface Versioned<T> {
  value: T;
  /** KV revision to compare-and-set against; 0 when the key has never been written. */
  revision: number;
}

/**
 * Shared, durable state of every alerter replica: a NATS KV bucket (works on NATS 2.9) used
 * only through compare-and-set on the key's revision, so two replicas that race on the same
 * window cannot both win.
 */
export class StateStore {
  readonly #kv: KV;

  private constructor(kv: KV) {
    this.#kv = kv;
  }

  static async open(nc: NatsConnection, bucket: string): Promise<StateStore> {
    const kv = await new Kvm(nc).create(bucket, { history: 1 });
    return new StateStore(kv);
  }

  /** Reads a key; a missing, deleted or unreadable value gives `empty` at its revision. */
  async read<S extends z.ZodType>(
    key: string,
    schema: S,
    empty: z.output<S>,
  ): Promise<Versioned<z.output<S>>> {
    const entry = await this.#kv.get(key);
    if (!entry) return { value: empty, revision: 0 };
    if (entry.operation !== 'PUT' || entry.length === 0) {
      return { value: empty, revision: entry.revision };
    }
    const parsed = schema.safeParse(entry.json());
    return { value: parsed.success ? parsed.data : empty, revision: entry.revision };
  }

  /**
   * Writes `value` if the key is still at `revision`. Returns the new revision, or undefined
   * when another writer got there first (the caller re-reads and decides again).
   */
  async compareAndSet(key: string, value: unknown, revision: number): Promise<number | undefined> {
    const data = JSON.stringify(value);
    try {
      return revision === 0
        ? await this.#kv.create(key, data)
        : await this.#kv.update(key, data, revision);
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

/** KV keys: `win.<level>.<budget>`, `burn.<level>.<budget>`, `susp.<tenant>`. */
export const stateKeys = {
  window: (level: string, budget: string) => `win.${level}.${budget}`,
  burn: (level: string, budget: string) => `burn.${level}.${budget}`,
  suspension: (tenant: string) => `susp.${tenant}`,
} as const;

/** Retries a compare-and-set step until it applies or decides nothing is to be done. */
export async function casLoop<T>(
  step: () => Promise<{ done: true; result: T } | { done: false }>,
  what: string,
  maxAttempts = 50,
): Promise<T> {
  for (let i = 0; i < maxAttempts; i++) {
    const r = await step();
    if (r.done) return r.result;
  }
  throw new Error(`${what}: still conflicting after ${maxAttempts} compare-and-set attempts`);
}
