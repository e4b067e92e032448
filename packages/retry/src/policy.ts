/** How a delay is spread, so that clients that failed together do not all retry together. */
export const Jitter = {
  /** Exactly the computed delay. */
  none: 'none',
  /** Uniform in [0, delay]: the widest spread ("full jitter"). */
  full: 'full',
  /** Uniform in [delay / 2, delay]: spread, but never much sooner than the delay. */
  equal: 'equal',
} as const;
export type Jitter = (typeof Jitter)[keyof typeof Jitter];

/**
 * The one retry policy. The wait after failed attempt n (1-based) is
 * `min(maxMs, initialMs * factor^(n-1))`, then jittered. Limits are optional: a number of
 * attempts, a span of time, or neither (a loop that retries until it is stopped).
 */
export interface RetryPolicy {
  /** Wait after the first failure. */
  initialMs: number;
  /** Longest wait. */
  maxMs: number;
  /** Growth per failure: 2 doubles (the default), 1 keeps every wait at `initialMs`. */
  factor?: number;
  /** Default `none`. */
  jitter?: Jitter;
  /** Attempts in all, the first one included. Unset: no limit. */
  maxAttempts?: number;
  /** Give up when the next attempt would start more than this after the first. Unset: no limit. */
  retryForMs?: number;
}

/** Past this the delay is at `maxMs` anyway; the cap keeps `initialMs * factor^n` finite. */
const MAX_EXPONENT = 64;

/** The wait after failed attempt `attempt` (1-based), ignoring the policy's limits. */
export function backoffDelay(policy: RetryPolicy, attempt: number, random = Math.random): number {
  const exponent = Math.min(Math.max(0, attempt - 1), MAX_EXPONENT);
  const ceiling = Math.min(policy.maxMs, policy.initialMs * (policy.factor ?? 2) ** exponent);
  switch (policy.jitter ?? Jitter.none) {
    case Jitter.none:
      return Math.round(ceiling);
    case Jitter.full:
      return Math.round(random() * ceiling);
    case Jitter.equal:
      return Math.round(ceiling / 2 + (random() * ceiling) / 2);
  }
}

/** Whether the policy's limits allow another attempt after `attempt`, `delayMs` from now. */
export function allowsRetry(
  policy: RetryPolicy,
  attempt: number,
  elapsedMs: number,
  delayMs: number,
): boolean {
  if (policy.maxAttempts !== undefined && attempt >= policy.maxAttempts) return false;
  return policy.retryForMs === undefined || elapsedMs + delayMs <= policy.retryForMs;
}

/**
 * The wait before the next attempt after failed attempt `attempt`, or `undefined` when the
 * policy gives up. `elapsedMs` counts from the first attempt, or from whenever the caller's
 * clock starts (the alerter counts from when a webhook job was queued). For retries that
 * another system runs, such as a JetStream redelivery after `nak(delay)`.
 */
export function retryDelay(
  policy: RetryPolicy,
  attempt: number,
  elapsedMs = 0,
  random = Math.random,
): number | undefined {
  const delayMs = backoffDelay(policy, attempt, random);
  return allowsRetry(policy, attempt, elapsedMs, delayMs) ? delayMs : undefined;
}

/**
 * Backoff for a loop that never gives up (a consume loop, a relay): `next()` after each
 * failure, `reset()` once something worked, so the next failure starts from `initialMs`.
 */
export class Backoff {
  readonly #policy: RetryPolicy;
  readonly #random: () => number;
  #failures = 0;

  constructor(policy: RetryPolicy, random = Math.random) {
    this.#policy = policy;
    this.#random = random;
  }

  /** Failures since the last reset. */
  get failures(): number {
    return this.#failures;
  }

  next(): number {
    this.#failures += 1;
    return backoffDelay(this.#policy, this.#failures, this.#random);
  }

  reset(): void {
    this.#failures = 0;
  }
}
