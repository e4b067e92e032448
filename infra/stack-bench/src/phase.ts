import { readCpu, readMachineBusy, readSyscalls, type Syscalls } from './cpu.js';
import type { LoadGenerator } from './load/driver.js';
import type { Load, LoadResult } from './load/protocol.js';
import { countsDelta, type NatsCounts, type NatsMonitor } from './nats-monitor.js';
import type { CommandStat, RedisStats, SlowlogSample } from './redis-stats.js';
import type { Targets } from './targets.js';

/**
 * The mock called directly, through the bench's bare proxy, through the whole stack, and
 * through the floor of the architecture (floor/): its edge batching the requests of one turn
 * of its event loop (`floor`, as the real edge does), or sending each alone (`floor-single`).
 */
const TARGETS = ['direct', 'proxy', 'stack', 'floor', 'floor-single'] as const;
export type TargetName = (typeof TARGETS)[number];

/** Targets that run admit and settle (Redis is measured in their phases). */
export const BUDGETED: readonly TargetName[] = ['stack', 'floor', 'floor-single'];
const isFloor = (t: TargetName) => t === 'floor' || t === 'floor-single';

export interface PhaseSpec {
  round: number;
  target: TargetName;
  /** `closed@32`, `closed@32 stream`, `open 100/s`, ... */
  load: string;
  shape: Load;
  stream: boolean;
}

/** What one phase measured, raw: per-call figures are derived in summary.ts. */
export interface PhaseResult {
  round: number;
  target: TargetName;
  load: string;
  client: LoadResult;
  /** From the first call to the end of the settle: the window CPU and messages are read over. */
  windowSeconds: number;
  /** How long the stack took to finish the phase's work after the last reply. */
  settleMs: number;
  /** CPU µs over the window, by process (the stack's, `load generator`, `bench runner`). */
  cpu: Record<string, number>;
  /** The same, while the load ran (the settle left out). */
  cpuDuringLoad: Record<string, number>;
  /** Read and write system calls over the window, by process (absent in older results). */
  syscalls?: Record<string, Syscalls>;
  /** Busy CPU µs of the whole machine (all cores) while the load ran. */
  machineBusy: number;
  nats: NatsCounts;
  /** Stack and floor phases only. */
  redis?: { commands: Record<string, CommandStat> } & SlowlogSample;
}

export interface PhaseDeps {
  load: LoadGenerator;
  nats: NatsMonitor;
  redis: RedisStats;
  pids: Readonly<Record<string, number>>;
  targets: Targets;
  seconds: number;
}

function delta(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.keys(b).map((k) => [k, b[k]! - (a[k] ?? NaN)]));
}

function syscallsDelta(
  a: Record<string, Syscalls>,
  b: Record<string, Syscalls>,
): Record<string, Syscalls> {
  return Object.fromEntries(
    Object.entries(b).map(([k, x]) => [
      k,
      { reads: x.reads - (a[k]?.reads ?? NaN), writes: x.writes - (a[k]?.writes ?? NaN) },
    ]),
  );
}

/**
 * Runs one phase: counters read before, the load, the stack left to finish what the calls
 * caused (events relayed, inserted, alerted on), counters read after. Redis commandstats and
 * the per-script slowlog sample are taken in stack and floor phases only.
 */
export async function runPhase(spec: PhaseSpec, d: PhaseDeps): Promise<PhaseResult> {
  const both = d.targets[spec.target];
  if (!both) throw new Error(`no target ${spec.target} in this run`);
  const target = both[spec.stream ? 'stream' : 'plain'];
  const measureRedis = BUDGETED.includes(spec.target);
  if (measureRedis) await d.redis.reset();
  const natsBefore = await d.nats.counts();
  const start = performance.now();
  const cpuBefore = readCpu(d.pids);
  const callsBefore = readSyscalls(d.pids);
  const busyBefore = readMachineBusy();
  const client = await d.load.run(target, spec.shape, d.seconds);
  const cpuLoadEnd = readCpu(d.pids);
  const busyLoadEnd = readMachineBusy();
  const settleMs = await d.nats.settle({ quietMs: 300, timeoutMs: 20_000 });
  const cpuAfter = readCpu(d.pids);
  const callsAfter = readSyscalls(d.pids);
  const windowSeconds = (performance.now() - start) / 1_000;
  const natsAfter = await d.nats.counts();
  const redis = measureRedis ? await d.redis.read() : undefined;
  return {
    round: spec.round,
    target: spec.target,
    load: spec.load,
    client,
    windowSeconds,
    settleMs,
    cpu: delta(cpuBefore, cpuAfter),
    cpuDuringLoad: delta(cpuBefore, cpuLoadEnd),
    syscalls: syscallsDelta(callsBefore, callsAfter),
    machineBusy: busyLoadEnd - busyBefore,
    nats: countsDelta(natsBefore, natsAfter),
    ...(redis ? { redis } : {}),
  };
}

/**
 * Every phase of a run: per load, the targets side by side, their order reversed each round
 * (direct, proxy, stack, floor, floor-single; then the other way round), so that neither end
 * of a comparison always runs first. `targets` leaves some out (the floor: `floor: false`);
 * the floor has no streamed loop (its edge reads the upstream's reply whole).
 */
export function plan(o: {
  rounds: number;
  connections: number;
  rates: readonly number[];
  stream: boolean;
  floor?: boolean;
}): PhaseSpec[] {
  const targets = TARGETS.filter((t) => (o.floor ?? true) || !isFloor(t));
  const loads: Array<Omit<PhaseSpec, 'round' | 'target'>> = [
    {
      load: `closed@${o.connections}`,
      shape: { mode: 'closed', connections: o.connections },
      stream: false,
    },
    ...(o.stream
      ? [
          {
            load: `closed@${o.connections} stream`,
            shape: { mode: 'closed', connections: o.connections } as const,
            stream: true,
          },
        ]
      : []),
    ...o.rates.map((rate) => ({
      load: `open ${rate}/s`,
      shape: { mode: 'open', rate } as const,
      stream: false,
    })),
  ];
  const phases: PhaseSpec[] = [];
  for (let round = 0; round < o.rounds; round++) {
    const order = round % 2 === 0 ? targets : [...targets].reverse();
    for (const l of loads) {
      for (const target of order) {
        if (!(l.stream && isFloor(target))) phases.push({ ...l, round, target });
      }
    }
  }
  return phases;
}
