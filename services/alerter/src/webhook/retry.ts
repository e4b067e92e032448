import { backoffDelay, Jitter, retryDelay } from '@holdfast/retry';
import type { WebhookRetryPolicy } from '../env.js';

/**
 * The shared backoff with "equal jitter" unless the policy names another: attempt n (1-based)
 * failed, the next waits between half and all of min(max, initial * 2^(n-1)). The jitter
 * spreads the retries of many deliveries to one receiver that comes back up.
 */
function jittered(policy: WebhookRetryPolicy): WebhookRetryPolicy {
  return { jitter: Jitter.equal, ...policy };
}

export function backoffMs(attempt: number, policy: WebhookRetryPolicy, random = Math.random) {
  return backoffDelay(jittered(policy), attempt, random);
}

export type NextStep = { kind: 'retry'; delayMs: number } | { kind: 'dead_letter' };

/** After a failed attempt: retry later, or give up when the retry would fall past retryFor. */
export function nextStep(opts: {
  attempt: number;
  enqueuedAtMs: number;
  nowMs: number;
  policy: WebhookRetryPolicy;
  random?: () => number;
}): NextStep {
  const elapsedMs = opts.nowMs - opts.enqueuedAtMs;
  const delayMs = retryDelay(jittered(opts.policy), opts.attempt, elapsedMs, opts.random);
  return delayMs === undefined ? { kind: 'dead_letter' } : { kind: 'retry', delayMs };
}

/** The schedule without jitter (upper bounds), for docs and logs: delays and their sum. */
export function schedule(
  policy: WebhookRetryPolicy,
): Array<{ attempt: number; delayMs: number; atMs: number }> {
  const out: Array<{ attempt: number; delayMs: number; atMs: number }> = [];
  for (let attempt = 1, at = 0; ; attempt++) {
    const delayMs = retryDelay(jittered(policy), attempt, at, () => 1);
    if (delayMs === undefined) return out;
    at += delayMs;
    out.push({ attempt: attempt + 1, delayMs, atMs: at });
  }
}
