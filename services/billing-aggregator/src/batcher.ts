import type { Logger } from '@holdfast/runtime';

export interface BatcherOptions<T> {
  /** A batch is cut when it holds this many items... */
  maxItems: number;
  /** ...or when its first item has waited this long. */
  maxWaitMs: number;
  /**
   * Persists one batch. It owns its failures (nak, dead-letter); a throw is a bug, logged here.
   * At most one flush runs at a time; the next batch fills meanwhile.
   */
  flush: (items: T[]) => Promise<void>;
  logger: Logger;
}

/**
 * Size-or-interval batcher with backpressure. `add()` returns nothing while the batch has
 * room (no promise per item on the hot path); when the batch is full it waits until the previous flush is done and this batch is
 * handed to `flush`. So memory holds at most two batches (one flushing, one filling), and the
 * caller (the consume loop) stops pulling while ClickHouse is slow.
 */
export class Batcher<T> {
  readonly #opts: BatcherOptions<T>;
  #items: T[] = [];
  #timer: NodeJS.Timeout | undefined;
  #inFlight: Promise<void> | undefined;

  constructor(opts: BatcherOptions<T>) {
    if (opts.maxItems < 1) throw new Error('maxItems must be at least 1');
    this.#opts = opts;
  }

  /** Items waiting in the filling batch. */
  get size(): number {
    return this.#items.length;
  }

  /** Adds an item; returns a promise only when the caller must wait (the batch is full). */
  add(item: T): Promise<void> | undefined {
    this.#items.push(item);
    if (this.#items.length === 1) {
      this.#timer = setTimeout(() => void this.#cut(), this.#opts.maxWaitMs);
    }
    return this.#items.length >= this.#opts.maxItems ? this.#cut() : undefined;
  }

  /** Cuts the filling batch now and waits until every flush has finished. */
  async drain(): Promise<void> {
    await this.#cut();
    while (this.#inFlight) await this.#inFlight;
  }

  async #cut(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    // One flush at a time: a batch is handed over only after the previous one is persisted.
    while (this.#inFlight) await this.#inFlight;
    if (this.#items.length === 0) return;
    const items = this.#items;
    this.#items = [];
    const run = this.#opts.flush(items).catch((err: unknown) => {
      this.#opts.logger.error({ err, items: items.length }, 'batch flush threw (bug)');
    });
    this.#inFlight = run;
    void run.finally(() => {
      if (this.#inFlight === run) this.#inFlight = undefined;
    });
  }
}
