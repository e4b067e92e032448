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
  /** When the filling batch got its first item (ms since epoch). */
  #openedAt = 0;
  /** The batch handed to `flush` and not yet done with, and when it was opened. */
  #flushing: { items: T[]; openedAt: number } | undefined;
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

  /**
   * The items held (filling, full and waiting, or being flushed) in a batch opened at least
   * `minAgeMs` ago: every item of a younger batch came in less than `minAgeMs` ago. The consume
   * loop keeps these alive (`working()`), so a batch held longer than the ack wait (a long fill,
   * a slow insert ahead of it) is not redelivered meanwhile.
   */
  *held(minAgeMs: number): Generator<T> {
    const before = Date.now() - minAgeMs;
    const flushing = this.#flushing;
    if (flushing && flushing.openedAt <= before) yield* flushing.items;
    if (this.#items.length > 0 && this.#openedAt <= before) yield* this.#items;
  }

  /** Adds an item; returns a promise only when the caller must wait (the batch is full). */
  add(item: T): Promise<void> | undefined {
    this.#items.push(item);
    if (this.#items.length === 1) {
      this.#openedAt = Date.now();
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
    const flushing = { items, openedAt: this.#openedAt };
    this.#items = [];
    this.#flushing = flushing;
    const run = this.#opts.flush(items).catch((err: unknown) => {
      this.#opts.logger.error({ err, items: items.length }, 'batch flush threw (bug)');
    });
    this.#inFlight = run;
    void run.finally(() => {
      if (this.#inFlight === run) this.#inFlight = undefined;
      if (this.#flushing === flushing) this.#flushing = undefined;
    });
  }
}
