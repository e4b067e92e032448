import { describe, expect, test } from 'vitest';
import type { WindowPolicy } from './holdfast-config.js';
import { evaluate, HARD_LEVEL, isAfter, levels } from './thresholds.js';

const soft: WindowPolicy = { soft: [0.8, 0.95], hard: false, graceMs: 0, calendar: false };
const hard: WindowPolicy = { ...soft, hard: true };
const at = (used: number, limit = 1_000) => ({ used, limit });

describe('threshold transitions', () => {
  test('nothing fires below the first threshold', () => {
    expect(evaluate([], at(799), soft)).toBeUndefined();
  });

  test('reaching a threshold fires it once; staying above changes nothing', () => {
    expect(evaluate([], at(800), soft)).toEqual({ fired: [0.8], rearmed: [], next: [0.8] });
    expect(evaluate([0.8], at(900), soft)).toBeUndefined();
  });

  test('a jump past several thresholds fires each of them, ascending', () => {
    expect(evaluate([], at(990), soft)).toEqual({
      fired: [0.8, 0.95],
      rearmed: [],
      next: [0.8, 0.95],
    });
  });

  test('falling back below re-arms; crossing again fires again (hysteresis)', () => {
    const down = evaluate([0.8, 0.95], at(900), soft);
    expect(down).toEqual({ fired: [], rearmed: [0.95], next: [0.8] });
    expect(evaluate(down!.next, at(960), soft)?.fired).toEqual([0.95]);
  });

  test('the hard level exists only for enforced budgets and fires at 100%', () => {
    expect(levels(soft)).toEqual([0.8, 0.95]);
    expect(levels(hard)).toEqual([0.8, 0.95, HARD_LEVEL]);
    expect(evaluate([0.8, 0.95], at(999), hard)).toBeUndefined();
    expect(evaluate([0.8, 0.95], at(1_000), hard)?.fired).toEqual([HARD_LEVEL]);
    expect(evaluate([0.8, 0.95, 1], at(990), hard)?.rearmed).toEqual([HARD_LEVEL]);
  });

  test('a level dropped from the config re-arms instead of sticking', () => {
    expect(evaluate([0.5, 0.8], at(900), soft)).toEqual({ fired: [], rearmed: [0.5], next: [0.8] });
  });
});

describe('snapshot ordering', () => {
  test('later time wins; the stream sequence breaks ties', () => {
    const t1 = '2026-12-01T10:00:00.000Z';
    const t2 = '2026-12-01T10:00:00.001Z';
    expect(isAfter({ time: t1, seq: 5 }, null)).toBe(true);
    expect(isAfter({ time: t2, seq: 1 }, { time: t1, seq: 9 })).toBe(true);
    expect(isAfter({ time: t1, seq: 9 }, { time: t2, seq: 1 })).toBe(false);
    expect(isAfter({ time: t1, seq: 6 }, { time: t1, seq: 5 })).toBe(true);
    expect(isAfter({ time: t1, seq: 5 }, { time: t1, seq: 5 })).toBe(false);
  });
});
