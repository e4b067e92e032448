import { describe, expect, it } from 'vitest';
import { median, resultsTable, vsBudget } from './report.js';
import type { RunResult } from './run.js';

function result(
  mode: 'post' | 'reserve',
  workers: number,
  billed: number,
  served: number,
): RunResult {
  return {
    spec: { mode, workers, batchBudget: 40_000, phases: 'digests', honourRetryAfter: false },
    runId: 'exp-test',
    digests: {
      served,
      refused: { budget_exceeded: 60 - served },
      retries: 0,
      prompts: [],
      completions: [],
      ms: 1_000,
    },
    billed,
    providerBilled: billed,
  };
}

describe('report', () => {
  it('says how far over the budget, or how much of it was used', () => {
    expect(vsBudget(45_148, 40_000)).toBe('+12.9%');
    expect(vsBudget(38_176, 40_000)).toBe('95.4% used');
    expect(vsBudget(40_000, 40_000)).toBe('100.0% used');
  });

  it('takes medians', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 2, 3])).toBe(2.5);
  });

  it("prints the seed's table: one row per mode, workers side by side, medians of the reps", () => {
    const runs = [
      result('post', 4, 45_014, 33),
      result('post', 16, 45_148, 33),
      result('post', 16, 47_000, 34),
      result('post', 16, 44_000, 32),
      result('reserve', 4, 39_601, 29),
      result('reserve', 16, 38_176, 28),
    ];
    expect(resultsTable(runs, 40_000).split('\n').slice(2)).toEqual([
      '| check, bill after (`post`) | 4 / 16 | 45,014 / 45,148 | +12.5% / +12.9% | 33 / 33 | 27 / 27 | 45,014 / 47,000 |',
      '| reserve max_tokens (`reserve`) | 4 / 16 | 39,601 / 38,176 | 99.0% used / 95.4% used | 29 / 28 | 31 / 32 | 39,601 / 38,176 |',
    ]);
  });
});
