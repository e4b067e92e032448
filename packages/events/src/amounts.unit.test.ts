import { describe, expect, it } from 'vitest';
import { formatUsd } from './amounts.js';

describe('formatUsd', () => {
  it('keeps every micro-dollar, so two different amounts never print alike', () => {
    expect([155, 96, 2_500_000, 2_504_000, 1_234, 0, -40, 12_345_500_000].map(formatUsd)).toEqual([
      '$0.000155',
      '$0.000096',
      '$2.50',
      '$2.504',
      '$0.001234',
      '$0.00',
      '-$0.00004',
      '$12,345.50',
    ]);
  });
});
