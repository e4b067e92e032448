/** Waits `ms`. Resolves early, with `false`, when `signal` aborts; never rejects. */
export function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  return wait(ms, signal);
}

/**
 * Ends waits early: `wake()` cuts short every `sleep` on it, as when the service the waiting
 * retries ask is known to be back, so they try again now instead of at the end of their
 * backoff step. A wait that starts later is cut short too when a wake came since the `wakes`
 * it was given: a wake during an attempt is not lost.
 */
export class Wakeup {
  readonly #sleepers = new Set<() => void>();
  #wakes = 0;

  /** Wakes so far: read it before an attempt, pass it to `sleep` after. */
  get wakes(): number {
    return this.#wakes;
  }

  /** Waits in progress. */
  get sleeping(): number {
    return this.#sleepers.size;
  }

  /** Ends every wait in progress now; returns how many it ended. */
  wake(): number {
    this.#wakes += 1;
    const sleepers = [...this.#sleepers];
    this.#sleepers.clear();
    for (const end of sleepers) end();
    return sleepers.length;
  }

  /**
   * Waits `ms`, or until the next wake (at once when one came after `since`). Resolves `true`
   * when the time is up or a wake ended it, `false` when `signal` aborts; never rejects.
   */
  sleep(ms: number, signal?: AbortSignal, since = this.#wakes): Promise<boolean> {
    if (since !== this.#wakes && !signal?.aborted) return Promise.resolve(true);
    return wait(ms, signal, (end) => {
      this.#sleepers.add(end);
      return () => this.#sleepers.delete(end);
    });
  }
}

/** The one timer behind both: `onWake` registers the early end and returns its removal. */
function wait(
  ms: number,
  signal: AbortSignal | undefined,
  onWake?: (end: () => void) => () => void,
): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  if (ms <= 0) return Promise.resolve(true);
  return new Promise((resolve) => {
    const end = (elapsed: boolean) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      forget?.();
      resolve(elapsed);
    };
    const onAbort = () => end(false);
    const timer = setTimeout(() => end(true), ms);
    signal?.addEventListener('abort', onAbort, { once: true });
    const forget = onWake?.(() => end(true));
  });
}
