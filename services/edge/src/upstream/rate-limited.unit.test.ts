import { describe, expect, it } from 'vitest';
import type { RetryStory } from './client.js';
import { rateLimitedMessage } from './rate-limited.js';

const limited = (retryAfterMs: number | undefined, retries: Partial<RetryStory>) =>
  rateLimitedMessage({
    kind: 'status',
    status: 429,
    message: 'slow down',
    retryAfterMs,
    retries: {
      attempts: 1,
      waitedMs: 0,
      stop: 'retries',
      retryAfterCapMs: 10_000,
      upstreams: ['default'],
      ...retries,
    },
  });

describe('the upstream 429 message says what the edge did', () => {
  it('a Retry-After longer than the edge waits: answered at once, no retry, and when to retry', () => {
    expect(limited(30_000, { stop: 'retry_after' })).toBe(
      "The model upstream (default) answered 429 (rate limited) and asked to wait 30 s; the edge waits at most 10 s for a retry, so it did not retry. This is the provider's rate limit, not your Holdfast budget: retry in 30 s.",
    );
  });

  it('every retry used: how many attempts and how long the edge waited between them', () => {
    expect(limited(1_000, { attempts: 3, waitedMs: 2_350, stop: 'retries' })).toBe(
      "The model upstream (default) answered 429 (rate limited) to all 3 attempts; the edge waited 2.4 s between them in all, and the last answer asked to wait 1 s. This is the provider's rate limit, not your Holdfast budget: retry in 1 s.",
    );
    expect(
      limited(undefined, { attempts: 2, waitedMs: 300, upstreams: ['default', 'backup'] }),
    ).toBe(
      "The model upstreams (default, then backup) answered 429 (rate limited) to all 2 attempts; the edge waited 300 ms between them in all. This is the provider's rate limit, not your Holdfast budget: retry later.",
    );
  });

  it('an upstream with no retries says so; a Retry-After after some retries says when it stopped', () => {
    expect(limited(undefined, { stop: 'no_retries' })).toBe(
      "The model upstream (default) answered 429 (rate limited); the edge makes no retries on it (maxRetries: 0). This is the provider's rate limit, not your Holdfast budget: retry later.",
    );
    expect(limited(60_000, { attempts: 2, waitedMs: 250, stop: 'retry_after' })).toBe(
      "The model upstream (default) answered 429 (rate limited) to 2 attempts (the edge waited 250 ms between them); the last answer asked to wait 60 s, longer than the edge waits for a retry (10 s), so it stopped. This is the provider's rate limit, not your Holdfast budget: retry in 60 s.",
    );
  });
});
