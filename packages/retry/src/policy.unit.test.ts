import { describe, expect, test } from 'vitest';
import { Backoff, backoffDelay, retryDelay, type RetryPolicy } from './policy.js';

const doubling: RetryPolicy = { initialMs: 1_000, maxMs: 60_000 };

describe('backoffDelay', () => {
  test('doubles from the initial delay up to the cap', () => {
    expect([1, 2, 3, 4].map((n) => backoffDelay(doubling, n))).toEqual([
      1_000, 2_000, 4_000, 8_000,
    ]);
    expect(backoffDelay(doubling, 30)).toBe(60_000);
    expect(backoffDelay(doubling, 10_000)).toBe(60_000);
  });

  test('factor 1 is a fixed delay, and a zero initial delay stays zero however many failures', () => {
    expect(backoffDelay({ initialMs: 1_000, maxMs: 1_000, factor: 1 }, 7)).toBe(1_000);
    expect(backoffDelay({ initialMs: 0, maxMs: 0 }, 5_000)).toBe(0);
  });

  test('full jitter spreads over [0, delay], equal jitter over [delay / 2, delay]', () => {
    const full = { ...doubling, jitter: 'full' } as const;
    const equal = { ...doubling, jitter: 'equal' } as const;
    expect(backoffDelay(full, 3, () => 0)).toBe(0);
    expect(backoffDelay(full, 3, () => 1)).toBe(4_000);
    expect(backoffDelay(equal, 3, () => 0)).toBe(2_000);
    expect(backoffDelay(equal, 3, () => 1)).toBe(4_000);
    for (let i = 0; i < 100; i++) {
      const d = backoffDelay(equal, 5);
      expect(d).toBeGreaterThanOrEqual(8_000);
      expect(d).toBeLessThanOrEqual(16_000);
    }
  });
});

describe('retryDelay', () => {
  test('gives up after maxAttempts in all', () => {
    const p = { ...doubling, maxAttempts: 3 };
    expect(retryDelay(p, 2)).toBe(2_000);
    expect(retryDelay(p, 3)).toBeUndefined();
  });

  test('gives up when the next attempt would start past retryForMs', () => {
    const p = { ...doubling, retryForMs: 10_000 };
    expect(retryDelay(p, 3, 6_000)).toBe(4_000);
    expect(retryDelay(p, 3, 6_001)).toBeUndefined();
  });
});

test('Backoff grows with each failure and starts over after a reset', () => {
  const b = new Backoff({ initialMs: 250, maxMs: 1_000 });
  expect([b.next(), b.next(), b.next(), b.next()]).toEqual([250, 500, 1_000, 1_000]);
  expect(b.failures).toBe(4);
  b.reset();
  expect(b.next()).toBe(250);
});
