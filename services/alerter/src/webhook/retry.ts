import type { RetryPolicy } from '../config.js';

/**
 * Exponential backoff with "equal jitter": attempt n (1-based) failed, the next waits
 * between half and all of min(max, initial * 2^(n-1)). The jitter spreads the retries of
 * many deliveries to one receiver that comes back up.
 */
export function backoffMs(attempt: number, policy: RetryPolicy, random = Math.random): number {
  const base = Math.min(policy.maxMs, policy.initialMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(base / 2 + (random() * base) / 2);
}

export type NextStep = { kind: 'retry'; delayMs: number } | { kind: 'dead_letter' };

/** After a failed attempt: retry later, or give up when the retry would fall past retryFor. */
export function nextStep(opts: {
  attempt: number;
  enqueuedAtMs: number;
  nowMs: number;
  policy: RetryPolicy;
  random?: () => number;
}): NextStep {
  const delayMs = backoffMs(opts.attempt, opts.policy, opts.random);
  if (opts.nowMs + delayMs - opts.enqueuedAtMs > opts.policy.retryForMs) {
    return { kind: 'dead_letter' };
  }
  return { kind: 'retry', delayMs };
}

/** The schedule without jitter (upper bounds), for docs and logs: delays and their sum. */
export function schedule(
  policy: RetryPolicy,
): Array<{ attempt: number; delayMs: number; atMs: number }> {
  const out: Array<{ attempt: number; delayMs: number; atMs: number }> = [];
  let at = 0;
  for (let attempt = 1; ; attempt++) {
    const delayMs = backoffMs(attempt, policy, () => 1);
    if (at + delayMs > policy.retryForMs) return out;
    at += delayMs;
    out.push({ attempt: attempt + 1, delayMs, atMs: at });
  }
}
