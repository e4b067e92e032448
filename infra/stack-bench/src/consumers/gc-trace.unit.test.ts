import { describe, expect, it } from 'vitest';
import { tallyGc } from './gc-trace.js';

describe('tallyGc', () => {
  it('tallies scavenges and mark-compacts by cause, with their incremental steps', () => {
    const lines = [
      '[12538:0x33ef0490]       38 ms: Scavenge 3.9 (4.0) -> 3.6 (5.0) MB, 1.62 / 0.00 ms  (average mu = 1.000, current mu = 1.000) allocation failure; ',
      '[12538:0x33ef0490]       40 ms: Scavenge 4.3 (5.4) -> 4.0 (6.0) MB, 2.10 / 0.00 ms  (average mu = 1.000, current mu = 1.000) allocation failure; ',
      '{"level":30,"msg":"ready"}',
      '[12546:0x31f8fe70]      391 ms: Mark-Compact 40.5 (65.5) -> 35.5 (69.2) MB, 43.05 / 0.01 ms  (+ 56.0 ms in 73 steps since start of marking, biggest step 23.6 ms, walltime since start of marking 145 ms) (average mu = 1.000, current mu = 1.000) finalize incremental marking via stack guard; GC in old space requested',
      '[1:0x1]     9000 ms: Mark-Compact (reduce) 20.1 (30.0) -> 18.0 (25.0) MB, 5.50 / 0.00 ms  (average mu = 0.990, current mu = 0.980) memory reducer; GC in old space requested',
    ];
    expect(Object.fromEntries(tallyGc(lines))).toEqual({
      'Scavenge: allocation failure': { count: 2, pauseMs: 3.72, stepsMs: 0 },
      'Mark-Compact: finalize incremental marking via stack guard': {
        count: 1,
        pauseMs: 43.05,
        stepsMs: 56,
      },
      'Mark-Compact (reduce): memory reducer': { count: 1, pauseMs: 5.5, stepsMs: 0 },
    });
  });
});
