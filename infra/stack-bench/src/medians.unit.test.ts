import { describe, expect, it } from 'vitest';
import { medianOf } from './medians.js';

describe('medianOf', () => {
  it('takes the median of every number, key by key and index by index', () => {
    const runs = [
      { load: 'closed@32', cpu: { edge: 500, redis: 300 }, loads: [1, 10] },
      { load: 'closed@32', cpu: { edge: 700, redis: null }, loads: [3, 30] },
      { load: 'closed@32', cpu: { edge: 600 }, loads: [2, 20] },
    ];
    expect(medianOf(runs)).toEqual({
      load: 'closed@32',
      cpu: { edge: 600, redis: 300 },
      loads: [2, 20],
    });
  });
});
