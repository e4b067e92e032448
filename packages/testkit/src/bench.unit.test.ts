import { expect, test } from 'vitest';
import { medianTable, medians, type LoadResult } from './bench.js';

const run = (perSecond: number, p50: number, p99: number, errors: number): LoadResult => ({
  ops: perSecond,
  seconds: 1,
  perSecond,
  p50,
  p99,
  errors,
});

const results = {
  'raw @1': [run(900, 0.2, 0.9, 0), run(1_100, 0.3, 1.1, 2), run(1_000, 0.25, 1, 1)],
  'holdfast @64': [run(20_000.4, 1.5, 4.25, 0)],
};

test('medians takes each scenario field over its rounds', () => {
  const m = medians(results);
  expect(m('raw @1', 'perSecond')).toBe(1_000);
  expect(m('raw @1', 'p99')).toBe(1);
  expect(m('raw @1', 'errors')).toBe(1);
  expect(m('holdfast @64', 'p50')).toBe(1.5);
});

test('medianTable prints a row a scenario, in order, under the named rate column', () => {
  expect(medianTable(results, { nameWidth: 14, rateLabel: 'pairs/s', rateWidth: 9 })).toBe(
    [
      'scenario        pairs/s    p50 ms    p99 ms  errors',
      'raw @1             1000     0.250     1.000       1',
      'holdfast @64      20000     1.500     4.250       0',
    ].join('\n'),
  );
});

test('medianTable defaults to ops/s in ten columns', () => {
  expect(medianTable(results, { nameWidth: 14 }).split('\n')[0]).toBe(
    'scenario'.padEnd(14) + '     ops/s    p50 ms    p99 ms  errors',
  );
});
