import { describe, expect, it } from 'vitest';
import { phase } from '../test/phases.js';
import { median, summarise } from './summary.js';

describe('median', () => {
  it('is the middle value, or the mean of the two middle ones; NaN is left out', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([NaN, 5])).toBe(5);
    expect(median([])).toBeNaN();
  });
});

describe('summarise', () => {
  const directAndStack = [
    phase(0, 'direct', 1000, 1),
    phase(0, 'stack', 100, 10),
    phase(1, 'stack', 200, 12),
    phase(1, 'direct', 4000, 1),
    phase(2, 'direct', 1000, 2),
    phase(2, 'stack', 300, 10),
  ];

  it('pairs stack and direct within each round for ratios, and medians the rest over rounds', () => {
    const s = summarise(directAndStack, 2);
    const [closed] = s.loads;
    // Per round: 0.1, 0.05, 0.3 -> 0.1 (not 200 / 1000).
    expect(closed!.stackVsDirect.throughputRatio).toBeCloseTo(0.1);
    expect(closed!.stackVsDirect.addedP50).toBe(9);
    expect(closed!.stack!.perSecond).toBe(200);
    expect(closed!.stack!.cpuPerCall).toMatchObject({ edge: 500, authority: 300, holdfast: 880 });
    expect(closed!.stack!.nats.inPerCall).toBe(10);
    expect(closed!.stack!.syscallsPerCall).toMatchObject({
      edge: { reads: 4, writes: 3 },
      authority: { reads: 2, writes: 1 },
    });
    expect(closed!.stack!.machineBusyShare).toBe(0.5);
  });

  it('has no proxy figures for a run without proxy phases', () => {
    const s = summarise([phase(0, 'direct', 1000, 1), phase(0, 'stack', 100, 10)], 2);
    const [closed] = s.loads;
    expect(closed!.proxy).toBeUndefined();
    expect(closed!.stackVsProxy.throughputRatio).toBeNaN();
    expect(closed!.proxyVsDirect.addedP50).toBeNaN();
    expect(closed!.edgeOverProxyCpu).toBeNaN();
  });

  it('pairs the bare proxy with stack and direct, its CPU read from its own process', () => {
    const proxy = [phase(0, 'proxy', 500, 2), phase(1, 'proxy', 400, 4), phase(2, 'proxy', 600, 3)];
    const s = summarise([...directAndStack, ...proxy], 2);
    const [closed] = s.loads;
    // Per round stack / proxy: 0.2, 0.5, 0.5; proxy / direct: 0.5, 0.1, 0.6.
    expect(closed!.stackVsProxy.throughputRatio).toBeCloseTo(0.5);
    expect(closed!.proxyVsDirect.throughputRatio).toBeCloseTo(0.5);
    // Per round stack - proxy p50: 8, 8, 7; proxy - direct: 1, 3, 1.
    expect(closed!.stackVsProxy.addedP50).toBe(8);
    expect(closed!.proxyVsDirect.addedP50).toBe(1);
    expect(closed!.stackVsDirect.throughputRatio).toBeCloseTo(0.1);
    // The bare proxy's CPU per call by round: 200, 210, 220.
    expect(closed!.proxy!.cpuPerCall['bare-proxy']).toBe(210);
    expect(closed!.proxy!.perSecond).toBe(500);
    // The edge's 500 µs a call less the bare proxy's of the same round: 300, 290, 280.
    expect(closed!.edgeOverProxyCpu).toBe(290);
  });

  it("sums the floor's own processes for its all of Holdfast, and pairs the stack with it by role", () => {
    const floor = [
      phase(0, 'floor', 600, 3),
      phase(1, 'floor', 800, 2),
      phase(2, 'floor', 700, 4),
      phase(0, 'floor-single', 500, 3),
    ];
    const s = summarise([...directAndStack, ...floor], 2);
    const [closed] = s.loads;
    // 150 + 10 per round, 100, 40, 20, 5, 5, 0: 330 in round 1.
    expect(closed!.floor!.cpuPerCall).toMatchObject({ 'floor-edge': 160, holdfast: 330 });
    expect(closed!.stack!.cpuPerCall.holdfast).toBe(880);
    expect(closed!['floor-single']!.cpuPerCall.holdfast).toBe(320);
    // Per round floor / direct: 0.6, 0.2, 0.7; floor-single ran in round 0 only.
    expect(closed!.floorVsDirect!.throughputRatio).toBeCloseTo(0.6);
    expect(closed!.floorSingleVsDirect!.throughputRatio).toBeCloseTo(0.5);
    // The stack less the floor, role by role: edge 500 - 160 (the round's median), NATS 0.
    expect(closed!.stackOverFloorCpu).toMatchObject({
      edge: 340,
      authority: 200,
      nats: 0,
      alerter: 5,
      holdfast: 550,
    });
    expect(s.idleFloorPerSecond!['floor-edge']).toBe(0);
  });
});
