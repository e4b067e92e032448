import { describe, expect, test } from 'vitest';
import {
  backoffMs,
  durationMs,
  isRetryableStatus,
  limitsSeen,
  retryAfterMs,
  retryDelayMs,
} from './retry.js';

const policy = { retryBaseMs: 100, retryMaxMs: 1_000, retryAfterCapMs: 5_000 };

describe('upstream retry policy', () => {
  test('429, 408 and 5xx are retried; other 4xx are not', () => {
    expect([429, 408, 500, 502, 503, 529].every(isRetryableStatus)).toBe(true);
    expect([400, 401, 403, 404, 413, 422].some(isRetryableStatus)).toBe(false);
  });

  test('Retry-After: retry-after-ms first, then seconds, then an HTTP date', () => {
    expect(retryAfterMs({ 'retry-after-ms': '250', 'retry-after': '9' })).toBe(250);
    expect(retryAfterMs({ 'retry-after': '2' })).toBe(2_000);
    expect(retryAfterMs({ 'retry-after': '1.5' })).toBe(1_500);
    const now = Date.UTC(2026, 0, 1, 0, 0, 0);
    expect(retryAfterMs({ 'retry-after': 'Thu, 01 Jan 2026 00:00:30 GMT' }, now)).toBe(30_000);
    expect(retryAfterMs({ 'retry-after': 'soon' })).toBeUndefined();
    expect(retryAfterMs({})).toBeUndefined();
  });

  test('backoff doubles per retry under a cap, with full jitter', () => {
    expect(backoffMs(0, policy, () => 1)).toBe(100);
    expect(backoffMs(2, policy, () => 1)).toBe(400);
    expect(backoffMs(9, policy, () => 1)).toBe(1_000);
    expect(backoffMs(3, policy, () => 0)).toBe(0);
    expect(backoffMs(3, policy, () => 0.5)).toBe(400);
  });

  test('waits at least what the upstream asked, and not at all when it asks too much', () => {
    expect(retryDelayMs(0, 3_000, policy, () => 1)).toBe(3_000);
    expect(retryDelayMs(3, 10, policy, () => 1)).toBe(800);
    expect(retryDelayMs(0, 5_001, policy)).toBeUndefined();
    expect(retryDelayMs(1, undefined, policy, () => 0.5)).toBe(100);
  });
});

describe("OpenAI's x-ratelimit headers", () => {
  test('durations in its format, whole or not at all', () => {
    expect(durationMs('6m0s')).toBe(360_000);
    expect(durationMs('1.5s')).toBe(1_500);
    expect(durationMs('20ms')).toBe(20);
    expect(durationMs('2h3m')).toBe(7_380_000);
    expect(durationMs('soon')).toBeUndefined();
    expect(durationMs('5s later')).toBeUndefined();
    expect(durationMs(undefined)).toBeUndefined();
  });
  test('tokens left and their reset, when both are there and sane', () => {
    expect(
      limitsSeen({ 'x-ratelimit-remaining-tokens': '1200', 'x-ratelimit-reset-tokens': '3s' }),
    ).toEqual({ remainingTokens: 1_200, resetMs: 3_000 });
    expect(
      limitsSeen({ 'x-ratelimit-remaining-tokens': '-1', 'x-ratelimit-reset-tokens': '3s' }),
    ).toBeUndefined();
    expect(limitsSeen({ 'x-ratelimit-remaining-tokens': '5' })).toBeUndefined();
  });
  test("Anthropic's tokens left, with its reset as a time; the input-tokens pair otherwise", () => {
    const now = Date.parse('2026-12-01T12:00:00Z');
    expect(
      limitsSeen(
        {
          'anthropic-ratelimit-tokens-remaining': '900',
          'anthropic-ratelimit-tokens-reset': '2026-12-01T12:00:20Z',
        },
        now,
      ),
    ).toEqual({ remainingTokens: 900, resetMs: 20_000 });
    expect(
      limitsSeen(
        {
          'anthropic-ratelimit-input-tokens-remaining': '40',
          'anthropic-ratelimit-input-tokens-reset': '2026-12-01T11:59:00Z',
        },
        now,
      ),
    ).toEqual({ remainingTokens: 40, resetMs: 0 });
    expect(
      limitsSeen(
        {
          'anthropic-ratelimit-tokens-remaining': '900',
          'anthropic-ratelimit-tokens-reset': 'tomorrow',
        },
        now,
      ),
    ).toBeUndefined();
    expect(limitsSeen({}, now)).toBeUndefined();
  });
});
