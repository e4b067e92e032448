import { allowsRetry, backoffDelay, type RetryPolicy } from './policy.js';
import { sleep, type Wakeup } from './sleep.js';

/** What one attempt came to: a value (maybe a failure as a value) or a thrown error. */
export type Outcome<T> = { ok: true; value: T } | { ok: false; error: unknown };

export interface RetryOptions<T> {
  policy: RetryPolicy;
  /** Whether a thrown error is worth another attempt. Default: every one. */
  retryable?: (error: unknown) => boolean;
  /** Whether a returned value is a failure worth another attempt (a `Result`). Default: none. */
  retryIf?: (value: T) => boolean;
  /**
   * The wait to use instead of the policy's `backoffMs` (e.g. at least what a Retry-After
   * asked), or `undefined` to stop retrying. The policy's time limit still applies.
   */
  delay?: (outcome: Outcome<T>, backoffMs: number) => number | undefined;
  /** Called before each wait (logs, metrics). */
  onRetry?: (info: { attempt: number; delayMs: number; outcome: Outcome<T> }) => void;
  /** Stops retrying: the promise rejects with the signal's reason. */
  signal?: AbortSignal;
  /**
   * Cuts the wait before the next attempt short: a wake while it waits, or while an attempt
   * runs, makes the next attempt now (the service is back). The backoff goes on growing.
   */
  wakeup?: Wakeup;
  random?: () => number;
  now?: () => number;
}

/**
 * Runs `attempt` (given its 1-based number) until it succeeds, fails in a way not worth
 * retrying, or the policy gives up. Resolves with the last value, a failed one included once
 * the policy gives up on it; rejects with the last error.
 */
export async function retry<T>(
  attempt: (n: number) => Promise<T>,
  opts: RetryOptions<T>,
): Promise<T> {
  const now = opts.now ?? Date.now;
  const started = now();
  for (let n = 1; ; n++) {
    opts.signal?.throwIfAborted();
    const wakes = opts.wakeup?.wakes;
    let outcome: Outcome<T>;
    try {
      outcome = { ok: true, value: await attempt(n) };
    } catch (error) {
      outcome = { ok: false, error };
    }
    const again = outcome.ok
      ? (opts.retryIf?.(outcome.value) ?? false)
      : (opts.retryable?.(outcome.error) ?? true);
    const backoffMs = backoffDelay(opts.policy, n, opts.random);
    const delayMs = again ? (opts.delay ? opts.delay(outcome, backoffMs) : backoffMs) : undefined;
    if (delayMs === undefined || !allowsRetry(opts.policy, n, now() - started, delayMs)) {
      if (outcome.ok) return outcome.value;
      throw outcome.error;
    }
    opts.onRetry?.({ attempt: n, delayMs, outcome });
    await (opts.wakeup
      ? opts.wakeup.sleep(delayMs, opts.signal, wakes)
      : sleep(delayMs, opts.signal));
  }
}
