import { describe, expect, test } from 'vitest';
import {
  burnBucketMs,
  burnPerSecond,
  mergeSamples,
  projectExhaustion,
  windowPeriod,
} from './burn-rate.js';

const LOOKBACK = 60_000;
const NOW = Date.UTC(2026, 11, 15, 12, 0, 0);

describe('burn rate', () => {
  test('samples from several replicas add up; old buckets fall out', () => {
    const bucket = burnBucketMs(LOOKBACK);
    const a = mergeSamples({ buckets: [] }, new Map([[NOW - bucket, 600]]), NOW, LOOKBACK);
    const b = mergeSamples(
      a,
      new Map([
        [NOW - bucket, 400],
        [NOW - 10 * LOOKBACK, 9_999],
      ]),
      NOW,
      LOOKBACK,
    );
    expect(b.buckets).toEqual([[NOW - bucket, 1_000]]);
  });

  test('a recent burst is measured over its own span, not the whole lookback', () => {
    const bucket = burnBucketMs(LOOKBACK); // 6 s
    const rec = { buckets: [[NOW - bucket, 6_000]] as [number, number][] };
    expect(burnPerSecond(rec, NOW, LOOKBACK)).toBeCloseTo(1_000);
    const old = { buckets: [[NOW - LOOKBACK, 60_000]] as [number, number][] };
    expect(burnPerSecond(old, NOW, LOOKBACK)).toBeCloseTo(1_000);
  });

  test('refunds can make a bucket negative; burn never goes below zero', () => {
    expect(burnPerSecond({ buckets: [[NOW - 1_000, -50]] }, NOW, LOOKBACK)).toBe(0);
  });
});

describe('time to exhaustion', () => {
  const base = {
    limit: 1_000_000,
    used: 900_000,
    window: 'month' as const,
    calendar: false,
    nowMs: NOW,
    horizonSeconds: 3_600,
  };

  test('projects remaining / burn when inside the horizon', () => {
    expect(projectExhaustion({ ...base, burnPerSecond: 100 })).toBe(NOW + 1_000_000);
  });

  test('outside the horizon, without burn, or already exhausted: nothing', () => {
    expect(projectExhaustion({ ...base, burnPerSecond: 10 })).toBeUndefined();
    expect(projectExhaustion({ ...base, burnPerSecond: 0 })).toBeUndefined();
    expect(projectExhaustion({ ...base, used: 1_000_000, burnPerSecond: 100 })).toBeUndefined();
  });

  test('a sliding window whose steady state fits the limit never runs out', () => {
    const minute = {
      ...base,
      window: 'minute' as const,
      limit: 10_000,
      used: 9_000,
      horizonSeconds: 60,
    };
    expect(projectExhaustion({ ...minute, burnPerSecond: 100 })).toBeUndefined(); // 6,000/min
    expect(projectExhaustion({ ...minute, burnPerSecond: 200 })).toBe(NOW + 5_000); // 12,000/min
  });

  test('a calendar month that resets before it would run out: nothing', () => {
    const endOfMonth = Date.UTC(2026, 11, 31, 23, 30, 0);
    const cal = { ...base, calendar: true, nowMs: endOfMonth };
    expect(projectExhaustion({ ...cal, burnPerSecond: 40 })).toBeUndefined(); // 41.7 min left
    expect(projectExhaustion({ ...cal, burnPerSecond: 100 })).toBe(endOfMonth + 1_000_000);
  });

  test('periods: window-length spans, or the calendar month', () => {
    expect(windowPeriod('minute', 120_000, false)).toBe(2);
    expect(windowPeriod('minute', 179_999, false)).toBe(2);
    expect(windowPeriod('month', NOW, true)).toBe(2026 * 12 + 11);
  });
});
