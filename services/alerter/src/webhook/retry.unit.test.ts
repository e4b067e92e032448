import { describe, expect, test } from 'vitest';
import { DEFAULT_SETTINGS } from '../env.js';
import { backoffMs, nextStep, schedule } from './retry.js';

const policy = { initialMs: 1_000, maxMs: 60_000, retryForMs: 3_600_000 };

describe('webhook retry schedule', () => {
  test('doubles from the initial delay up to the cap, jittered between half and all', () => {
    expect([1, 2, 3, 4].map((n) => backoffMs(n, policy, () => 1))).toEqual([
      1_000, 2_000, 4_000, 8_000,
    ]);
    expect(backoffMs(30, policy, () => 1)).toBe(60_000);
    expect(backoffMs(3, policy, () => 0)).toBe(2_000);
    for (let i = 0; i < 100; i++) {
      const d = backoffMs(5, policy);
      expect(d).toBeGreaterThanOrEqual(8_000);
      expect(d).toBeLessThanOrEqual(16_000);
    }
  });

  test('dead-letters once the next attempt would fall past retryFor', () => {
    const t0 = 1_000_000;
    expect(
      nextStep({ attempt: 3, enqueuedAtMs: t0, nowMs: t0 + 10_000, policy, random: () => 1 }),
    ).toEqual({
      kind: 'retry',
      delayMs: 4_000,
    });
    expect(
      nextStep({ attempt: 60, enqueuedAtMs: t0, nowMs: t0 + 3_599_000, policy, random: () => 1 }),
    ).toEqual({ kind: 'dead_letter' });
  });

  test('the default schedule keeps retrying for at least an hour', () => {
    const s = schedule(DEFAULT_SETTINGS.retry);
    expect(s.at(-1)!.atMs).toBeGreaterThanOrEqual(3_600_000);
    expect(s[0]!.delayMs).toBe(DEFAULT_SETTINGS.retry.initialMs);
  });
});
