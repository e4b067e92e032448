import type { Failure, RetryStory } from './client.js';

/** `850 ms`, `2.4 s`, `30 s`. */
function duration(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  const s = ms / 1_000;
  return `${Number.isInteger(s) ? s : s.toFixed(1)} s`;
}

function tried(r: RetryStory): string {
  if (r.upstreams.length === 0) return 'upstream';
  return r.upstreams.length > 1
    ? `upstreams (${r.upstreams.join(', then ')})`
    : `upstream (${r.upstreams[0]})`;
}

/**
 * The message of a 429 upstream_rate_limited: what the upstream answered and asked, and what
 * the edge did about it (retried how often and how long, or why it did not), so the client
 * knows whether and when a retry can help. It is never the Holdfast budget.
 */
export function rateLimitedMessage(f: Extract<Failure, { kind: 'status' }>): string {
  const r: RetryStory = f.retries ?? {
    attempts: 1,
    waitedMs: 0,
    stop: 'retries',
    retryAfterCapMs: 0,
    upstreams: [],
  };
  const asked =
    f.retryAfterMs === undefined ? '' : ` and asked to wait ${duration(f.retryAfterMs)}`;
  let what: string;
  switch (r.stop) {
    case 'retry_after':
      what =
        r.attempts === 1
          ? `The model ${tried(r)} answered 429 (rate limited)${asked}; the edge waits at most ${duration(r.retryAfterCapMs)} for a retry, so it did not retry.`
          : `The model ${tried(r)} answered 429 (rate limited) to ${r.attempts} attempts (the edge waited ${duration(r.waitedMs)} between them); the last answer asked to wait ${duration(f.retryAfterMs ?? 0)}, longer than the edge waits for a retry (${duration(r.retryAfterCapMs)}), so it stopped.`;
      break;
    case 'capacity':
      what = `The model ${tried(r)} answered 429 (rate limited)${asked}; its declared requests per minute had none left for a retry, so the edge did not retry.`;
      break;
    case 'no_retries':
      what = `The model ${tried(r)} answered 429 (rate limited)${asked}; the edge makes no retries on it (maxRetries: 0).`;
      break;
    case 'retries':
      what =
        r.attempts === 1
          ? `The model ${tried(r)} answered 429 (rate limited)${asked}.`
          : `The model ${tried(r)} answered 429 (rate limited) to all ${r.attempts} attempts; the edge waited ${duration(r.waitedMs)} between them in all${asked ? `, and the last answer asked to wait ${duration(f.retryAfterMs!)}` : ''}.`;
  }
  const when =
    f.retryAfterMs === undefined ? 'retry later' : `retry in ${duration(f.retryAfterMs)}`;
  return `${what} This is the provider's rate limit, not your Holdfast budget: ${when}.`;
}
