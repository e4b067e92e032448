/** What an AbortSignal's `addEventListener` takes: a function, or an object with `handleEvent`. */
type Listener = Parameters<AbortSignal['addEventListener']>[1];

/**
 * A call's abort signal: an AbortSignal to everything that reads it (`aborted`, `reason`,
 * `throwIfAborted`, `abort` listeners, `onabort`), without Node's own. Node builds an AbortSignal
 * as an EventTarget whose prototype is swapped after it is made, and holds each of its listeners
 * by a weak reference: 4.3 µs of CPU to make one, and 4-5 µs more to add and remove a listener,
 * on every call (issue 14, docs/benchmarks.md); this one costs 0.1-0.2 µs for both. The readers
 * of a call's signal take it by its fields, as an AbortSignal's: the upstream client's attempt
 * (its listener), Node's `timers/promises` and `@holdfast/retry`'s sleeps, the token count's
 * pool. What it is not: an `instanceof AbortSignal`, so `AbortSignal.any` refuses it (nothing
 * passes a call's signal there). `call-signal.unit.test.ts` holds it to an AbortSignal's ways.
 */
export class CallSignal implements AbortSignal {
  onabort: ((this: AbortSignal, ev: Event) => unknown) | null = null;
  #aborted = false;
  #reason: unknown = undefined;
  #listeners: Listener[] | undefined;

  get aborted(): boolean {
    return this.#aborted;
  }

  get reason(): unknown {
    return this.#reason;
  }

  throwIfAborted(): void {
    if (this.#aborted) throw this.#reason;
  }

  /**
   * Adds an `abort` listener (once, as an EventTarget adds the same listener once). Every
   * listener is called at most once whatever its options say: a signal aborts once. One added
   * after the abort is never called, as on an AbortSignal.
   */
  addEventListener(type: string, listener: Listener | null): void {
    if (type !== 'abort' || listener === null || this.#aborted) return;
    const listeners = (this.#listeners ??= []);
    if (!listeners.includes(listener)) listeners.push(listener);
  }

  removeEventListener(type: string, listener: Listener | null): void {
    const listeners = this.#listeners;
    if (type !== 'abort' || listener === null || !listeners) return;
    const at = listeners.indexOf(listener);
    if (at >= 0) listeners.splice(at, 1);
  }

  /** Calls the `abort` listeners with `event` (the abort does; nothing else sends one). */
  dispatchEvent(event: Event): boolean {
    if (event.type !== 'abort') return true;
    const listeners = this.#listeners ?? [];
    this.#listeners = undefined;
    if (this.onabort) call(this, this.onabort, event);
    for (const listener of listeners) call(this, listener, event);
    return true;
  }

  /** Aborts with `reason` (once; later calls do nothing): `onabort`, then each listener in order. */
  abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.dispatchEvent(new Event('abort'));
  }
}

/**
 * A listener that throws does not stop the others: its error is thrown again on the next tick,
 * an uncaught exception, as an EventTarget reports it.
 */
function call(target: CallSignal, listener: Listener, event: Event): void {
  try {
    if (typeof listener === 'function') listener.call(target, event);
    else listener.handleEvent(event);
  } catch (err) {
    process.nextTick(() => {
      throw err;
    });
  }
}
