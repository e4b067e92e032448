import type { IncomingHttpHeaders } from 'node:http';
import { backoffDelay, Jitter } from '@holdfast/retry';
import type { UpstreamRetry } from '../env.js';

/** Statuses worth another attempt: rate limited, or the upstream failed on its side. */
export function isRetryableStatus(status: number): boolean {
  return status === 429 || status === 408 || status >= 500;
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * How long the upstream asked us to wait: `retry-after-ms` (OpenAI), else `Retry-After` in
 * seconds or as an HTTP date. undefined when it did not say (or said nonsense).
 */
export function retryAfterMs(headers: IncomingHttpHeaders, now = Date.now()): number | undefined {
  const ms = Number(header(headers, 'retry-after-ms'));
  if (header(headers, 'retry-after-ms') !== undefined && Number.isFinite(ms) && ms >= 0) return ms;
  const raw = header(headers, 'retry-after')?.trim();
  if (!raw) return undefined;
  if (/^\d+(\.\d+)?$/.test(raw)) return Number(raw) * 1_000;
  const date = Date.parse(raw);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** Exponential backoff with full jitter: uniform in [0, min(max, base * 2^retry)]. */
export function backoffMs(retry: number, policy: UpstreamRetry, random = Math.random): number {
  const p = { initialMs: policy.retryBaseMs, maxMs: policy.retryMaxMs, jitter: Jitter.full };
  return backoffDelay(p, retry + 1, random);
}

/**
 * The wait before retry number `retry` (0-based) on the same upstream: at least what the
 * upstream asked for, or `undefined` when that is longer than we are willing to wait (then the
 * caller moves to the next upstream, or gives up).
 */
export function retryDelayMs(
  retry: number,
  askedMs: number | undefined,
  policy: UpstreamRetry,
  random = Math.random,
): number | undefined {
  if (askedMs !== undefined && askedMs > policy.retryAfterCapMs) return undefined;
  return Math.max(askedMs ?? 0, backoffMs(retry, policy, random));
}

/** `6m0s`, `1.5s`, `20ms`, `2h3m` (OpenAI's x-ratelimit-reset-* format) in ms. */
export function durationMs(text: string | undefined): number | undefined {
  if (!text) return undefined;
  const UNIT: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1_000, ms: 1 };
  let total = 0;
  let matched = '';
  for (const m of text.trim().matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)) {
    total += Number(m[1]) * UNIT[m[2]!]!;
    matched += m[0];
  }
  return matched.length > 0 && matched === text.trim() ? Math.round(total) : undefined;
}

/** What a provider said of its account limits on a response, when it said anything. */
export interface LimitsSeen {
  /** A 429: wait this long. */
  retryAfterMs?: number;
  /** Tokens it has left in its current window, and when that window resets. */
  remainingTokens?: number;
  resetMs?: number;
}

/**
 * Reads the tokens a provider says are left and when they reset: OpenAI's
 * `x-ratelimit-remaining-tokens` / `x-ratelimit-reset-tokens` (a duration), else Anthropic's
 * `anthropic-ratelimit-tokens-remaining` / `-reset` (an RFC 3339 time; the input-tokens pair
 * where the combined one is absent, as on accounts with separate input and output limits).
 */
export function limitsSeen(headers: IncomingHttpHeaders, now = Date.now()): LimitsSeen | undefined {
  if (header(headers, 'x-ratelimit-remaining-tokens') !== undefined) {
    return seen(
      header(headers, 'x-ratelimit-remaining-tokens'),
      durationMs(header(headers, 'x-ratelimit-reset-tokens')),
    );
  }
  for (const kind of ['tokens', 'input-tokens']) {
    const remaining = header(headers, `anthropic-ratelimit-${kind}-remaining`);
    if (remaining === undefined) continue;
    const at = Date.parse(header(headers, `anthropic-ratelimit-${kind}-reset`) ?? '');
    return seen(remaining, Number.isNaN(at) ? undefined : Math.max(0, at - now));
  }
  return undefined;
}

function seen(remainingText: string | undefined, resetMs: number | undefined) {
  const remaining = Number(remainingText);
  if (!Number.isSafeInteger(remaining) || remaining < 0 || resetMs === undefined) return undefined;
  return { remainingTokens: remaining, resetMs };
}
