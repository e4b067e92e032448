import type { PhaseResult, TargetName } from '../src/phase.js';

/**
 * A closed-loop phase of 10 s at `perSecond`: the edge 500 µs a call, the authority 300, NATS
 * 40, Redis 20, the alerter and the aggregator 10 each, ClickHouse 0 (all of Holdfast 880), the
 * mock 100 (4 reads and 3 writes a call by the edge, 2 and 1 by the authority); in proxy phases
 * the bare proxy 200 + 10 per round (so rounds differ); in floor phases the floor's edge
 * 150 + 10 per round, its authority 100, its alerter and aggregator 5 each (the floor's all of
 * Holdfast 320 + 10 per round, with the same servers).
 */
export function phase(
  round: number,
  target: TargetName,
  perSecond: number,
  p50: number,
): PhaseResult {
  const calls = perSecond * 10;
  const floor = target === 'floor' || target === 'floor-single' ? 1 : 0;
  const cpu = {
    edge: calls * 500,
    authority: calls * 300,
    nats: calls * 40,
    redis: calls * 20,
    alerter: calls * 10,
    aggregator: calls * 10,
    clickhouse: 0,
    'mock-upstream': calls * 100,
    'bare-proxy': calls * (target === 'proxy' ? 200 + round * 10 : 0),
    'floor-edge': calls * floor * (150 + round * 10),
    'floor-authority': calls * floor * 100,
    'floor-alerter': calls * floor * 5,
    'floor-aggregator': calls * floor * 5,
  };
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
    syscalls: {
      edge: { reads: calls * 4, writes: calls * 3 },
      authority: { reads: calls * 2, writes: calls },
    },
    machineBusy: 10 * 1e6,
    nats: { inMsgs: calls * 10, outMsgs: calls * 9, inBytes: 0, outBytes: 0, byClient: {} },
  };
}
