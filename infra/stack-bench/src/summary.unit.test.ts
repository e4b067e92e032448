import { describe, expect, it } from 'vitest';
import type { PhaseResult, TargetName } from './phase.js';
import { median, summarise } from './summary.js';

function phase(round: number, target: TargetName, perSecond: number, p50: number): PhaseResult {
  const calls = perSecond * 10;
  const cpu = { edge: calls * 500, authority: calls * 300, 'mock-upstream': calls * 100 };
  return {
    round,
    target,
    load: 'closed@32',
    client: {
      calls,
      errors: 0,
      errorSamples: [],
      seconds: 10,
      perSecond,
      p50,
      p90: p50,
      p99: p50 * 2,
      max: p50 * 3,
      mean: p50,
      sendLagP99: 0,
    },
    windowSeconds: 10,
    settleMs: 0,
    cpu,
    cpuDuringLoad: cpu,
    machineBusy: 10 * 1e6,
    nats: { inMsgs: calls * 10, outMsgs: calls * 9, inBytes: 0, outBytes: 0, byClient: {} },
  };
}

describe('median', () => {
  it('is the middle value, or the mean of the two middle ones; NaN is left out', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([NaN, 5])).toBe(5);
    expect(median([])).toBeNaN();
  });
});

describe('summarise', () => {
  it('pairs stack and direct within each round for ratios, and medians the rest over rounds', () => {
    const s = summarise(
      [
        phase(0, 'direct', 1000, 1),
        phase(0, 'stack', 100, 10),
        phase(1, 'stack', 200, 12),
        phase(1, 'direct', 4000, 1),
        phase(2, 'direct', 1000, 2),
        phase(2, 'stack', 300, 10),
      ],
      2,
    );
    const [closed] = s.loads;
    // Per round: 0.1, 0.05, 0.3 -> 0.1 (not 200 / 1000).
    expect(closed!.throughputRatio).toBeCloseTo(0.1);
    expect(closed!.addedP50).toBe(9);
    expect(closed!.stack!.perSecond).toBe(200);
    expect(closed!.stack!.cpuPerCall).toMatchObject({ edge: 500, authority: 300, holdfast: NaN });
    expect(closed!.stack!.nats.inPerCall).toBe(10);
    expect(closed!.stack!.machineBusyShare).toBe(0.5);
  });
});
