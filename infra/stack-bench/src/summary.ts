import type { PhaseResult, TargetName } from './phase.js';

/** What "all of Holdfast" adds up: every process of the stack but the mock model. */
export const HOLDFAST = [
  'edge',
  'authority',
  'nats',
  'redis',
  'alerter',
  'aggregator',
  'clickhouse',
] as const;

/**
 * What the floor's "all of Holdfast" adds up (floor/): its four processes, in the order of the
 * stack's that do the same (HOLDFAST), and the same servers.
 */
export const FLOOR = [
  'floor-edge',
  'floor-authority',
  'nats',
  'redis',
  'floor-alerter',
  'floor-aggregator',
  'clickhouse',
] as const;

const isFloor = (t: TargetName) => t === 'floor' || t === 'floor-single';

/** The processes a target's "all of Holdfast" sums (direct and proxy: the stack's, idle). */
export const allOf = (t: TargetName): readonly string[] => (isFloor(t) ? FLOOR : HOLDFAST);

export function median(xs: readonly number[]): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** Medians over the rounds of one load on one target. */
export interface TargetSummary {
  rounds: number;
  calls: number;
  errors: number;
  perSecond: number;
  p50: number;
  p99: number;
  /** CPU µs per call by process, plus `holdfast` (the sum of HOLDFAST, or of FLOOR). */
  cpuPerCall: Record<string, number>;
  /** Read and write system calls per call by process, plus `holdfast` (undefined in older results). */
  syscallsPerCall?: Record<string, { reads: number; writes: number }>;
  /** While the load ran: how busy the machine's cores were, and how many other processes took. */
  machineBusyShare: number;
  othersCores: number;
  settleMs: number;
  nats: {
    inPerCall: number;
    outPerCall: number;
    bytesPerCall: number;
    byClient: Record<string, { inPerCall: number; outPerCall: number }>;
  };
  redis?: {
    /** Per gateway call: how many of each command, and its µs per call (`INFO commandstats`). */
    commands: Record<string, { callsPerCall: number; usecPerCall: number }>;
    /** Redis's own execution time per gateway call, every command summed. */
    usecPerGatewayCall: number;
    /** From the SLOWLOG sample: µs per script call, and the commands it ran (count, µs). */
    scripts: Record<
      string,
      { samples: number; usecPerCall: number; commandsPerCall: number; commandsUsecPerCall: number }
    >;
  };
}

/** One target against another: paired within each round, then the median over rounds. */
export interface Pairing {
  /** Throughput of the one over the other's (closed loops). */
  throughputRatio: number;
  /** Latency the one adds over the other (ms). */
  addedP50: number;
  addedP99: number;
}

export interface LoadSummary {
  load: string;
  direct: TargetSummary | undefined;
  /** Through the bench's bare proxy (bare-proxy/app.ts). */
  proxy: TargetSummary | undefined;
  stack: TargetSummary | undefined;
  /** The stack against the mock called directly: what a user pays. */
  stackVsDirect: Pairing;
  /** The stack against the bare proxy: what Holdfast adds to the proxy hop. */
  stackVsProxy: Pairing;
  /** The bare proxy against the mock called directly: the proxy hop itself. */
  proxyVsDirect: Pairing;
  /** Per round the edge's CPU µs per call less the bare proxy's, then the median. */
  edgeOverProxyCpu: number;
  /** Through the floor (floor/), its edge batching requests; absent in runs before it. */
  floor?: TargetSummary | undefined;
  /** The same, each request alone. */
  'floor-single'?: TargetSummary | undefined;
  floorVsDirect?: Pairing;
  floorVsProxy?: Pairing;
  floorSingleVsDirect?: Pairing;
  floorSingleVsProxy?: Pairing;
  /**
   * Per round the stack's CPU µs per call less the (batched) floor's, process by process of
   * the same role (keys as HOLDFAST's, and `holdfast`), then the median: where the stack
   * spends beyond the least its architecture needs.
   */
  stackOverFloorCpu?: Record<string, number>;
}

export interface Summary {
  loads: LoadSummary[];
  /** Holdfast's processes while the calls went straight to the mock: CPU µs per second. */
  idleHoldfastPerSecond: Record<string, number>;
  /** The floor's, the same way (absent in runs before it). */
  idleFloorPerSecond?: Record<string, number>;
}

const perCall = (x: number, calls: number) => (calls > 0 ? x / calls : NaN);

function mapMedian(
  phases: readonly PhaseResult[],
  keys: readonly string[],
  f: (p: PhaseResult, k: string) => number,
): Record<string, number> {
  return Object.fromEntries(keys.map((k) => [k, median(phases.map((p) => f(p, k)))]));
}

function summariseTarget(phases: readonly PhaseResult[], cores: number): TargetSummary {
  const processes = Object.keys(phases[0]!.cpu);
  const all = allOf(phases[0]!.target);
  const holdfast = (p: PhaseResult) =>
    all.reduce((n, name) => n + (p.cpu[name] ?? NaN), 0) / p.client.calls;
  const ours = (p: PhaseResult) => Object.values(p.cpuDuringLoad).reduce((n, x) => n + x, 0);
  const clients = [...new Set(phases.flatMap((p) => Object.keys(p.nats.byClient)))];
  const withRedis = phases.filter((p) => p.redis);
  const commands = [...new Set(withRedis.flatMap((p) => Object.keys(p.redis!.commands)))];
  const scripts = [...new Set(withRedis.flatMap((p) => Object.keys(p.redis!.scripts)))];
  const m = (f: (p: PhaseResult) => number) => median(phases.map(f));
  const summary: TargetSummary = {
    rounds: phases.length,
    calls: phases.reduce((n, p) => n + p.client.calls, 0),
    errors: phases.reduce((n, p) => n + p.client.errors, 0),
    perSecond: m((p) => p.client.perSecond),
    p50: m((p) => p.client.p50),
    p99: m((p) => p.client.p99),
    cpuPerCall: {
      ...mapMedian(phases, processes, (p, k) => perCall(p.cpu[k]!, p.client.calls)),
      holdfast: m(holdfast),
    },
    machineBusyShare: m((p) => p.machineBusy / (p.client.seconds * 1e6 * cores)),
    othersCores: m((p) => Math.max(0, p.machineBusy - ours(p)) / (p.client.seconds * 1e6)),
    settleMs: m((p) => p.settleMs),
    nats: {
      inPerCall: m((p) => perCall(p.nats.inMsgs, p.client.calls)),
      outPerCall: m((p) => perCall(p.nats.outMsgs, p.client.calls)),
      bytesPerCall: m((p) => perCall(p.nats.inBytes + p.nats.outBytes, p.client.calls)),
      byClient: Object.fromEntries(
        clients.map((c) => [
          c,
          {
            inPerCall: m((p) => perCall(p.nats.byClient[c]?.inMsgs ?? 0, p.client.calls)),
            outPerCall: m((p) => perCall(p.nats.byClient[c]?.outMsgs ?? 0, p.client.calls)),
          },
        ]),
      ),
    },
  };
  const withCalls = phases.filter((p) => p.syscalls);
  if (withCalls.length > 0) {
    const s = (p: PhaseResult, k: string, f: 'reads' | 'writes') =>
      k === 'holdfast'
        ? all.reduce((n, name) => n + (p.syscalls![name]?.[f] ?? NaN), 0)
        : (p.syscalls![k]?.[f] ?? NaN);
    const per = (k: string, f: 'reads' | 'writes') =>
      median(withCalls.map((p) => perCall(s(p, k, f), p.client.calls)));
    summary.syscallsPerCall = Object.fromEntries(
      [...processes, 'holdfast'].map((k) => [
        k,
        { reads: per(k, 'reads'), writes: per(k, 'writes') },
      ]),
    );
  }
  if (withRedis.length > 0) {
    const r = (f: (p: PhaseResult) => number) => median(withRedis.map(f));
    summary.redis = {
      commands: Object.fromEntries(
        commands.map((c) => {
          const stat = (p: PhaseResult) => p.redis!.commands[c] ?? { calls: 0, usec: 0 };
          return [
            c,
            {
              callsPerCall: r((p) => perCall(stat(p).calls, p.client.calls)),
              usecPerCall: r((p) => perCall(stat(p).usec, stat(p).calls)),
            },
          ];
        }),
      ),
      usecPerGatewayCall: r((p) =>
        perCall(
          Object.values(p.redis!.commands).reduce((n, s) => n + s.usec, 0),
          p.client.calls,
        ),
      ),
      scripts: Object.fromEntries(
        scripts.map((s) => {
          const f = (k: 'usecPerCall' | 'commandsPerCall' | 'commandsUsecPerCall') =>
            r((p) => p.redis!.scripts[s]?.[k] ?? NaN);
          return [
            s,
            {
              samples: withRedis.reduce((n, p) => n + (p.redis!.scripts[s]?.samples ?? 0), 0),
              usecPerCall: f('usecPerCall'),
              commandsPerCall: f('commandsPerCall'),
              commandsUsecPerCall: f('commandsUsecPerCall'),
            },
          ];
        }),
      ),
    };
  }
  return summary;
}

function paired(
  phases: readonly PhaseResult[],
  one: TargetName,
  other: TargetName,
  f: (one: PhaseResult, other: PhaseResult) => number,
): number {
  const rounds = [...new Set(phases.map((p) => p.round))];
  return median(
    rounds.map((round) => {
      const a = phases.find((p) => p.round === round && p.target === one);
      const b = phases.find((p) => p.round === round && p.target === other);
      return a && b ? f(a, b) : NaN;
    }),
  );
}

function pairing(phases: readonly PhaseResult[], one: TargetName, other: TargetName): Pairing {
  return {
    throughputRatio: paired(phases, one, other, (a, b) => a.client.perSecond / b.client.perSecond),
    addedP50: paired(phases, one, other, (a, b) => a.client.p50 - b.client.p50),
    addedP99: paired(phases, one, other, (a, b) => a.client.p99 - b.client.p99),
  };
}

export function summarise(phases: readonly PhaseResult[], cores: number): Summary {
  const loads = [...new Set(phases.map((p) => p.load))].map((load): LoadSummary => {
    const of = phases.filter((p) => p.load === load);
    const target = (t: TargetName) => {
      const mine = of.filter((p) => p.target === t);
      return mine.length > 0 ? summariseTarget(mine, cores) : undefined;
    };
    const cpuPerCall = (p: PhaseResult, name: string): number =>
      name === 'holdfast'
        ? allOf(p.target).reduce((n, k) => n + cpuPerCall(p, k), 0)
        : perCall(p.cpu[name] ?? NaN, p.client.calls);
    return {
      load,
      direct: target('direct'),
      proxy: target('proxy'),
      stack: target('stack'),
      stackVsDirect: pairing(of, 'stack', 'direct'),
      stackVsProxy: pairing(of, 'stack', 'proxy'),
      proxyVsDirect: pairing(of, 'proxy', 'direct'),
      edgeOverProxyCpu: paired(
        of,
        'stack',
        'proxy',
        (s, p) => cpuPerCall(s, 'edge') - cpuPerCall(p, 'bare-proxy'),
      ),
      floor: target('floor'),
      'floor-single': target('floor-single'),
      floorVsDirect: pairing(of, 'floor', 'direct'),
      floorVsProxy: pairing(of, 'floor', 'proxy'),
      floorSingleVsDirect: pairing(of, 'floor-single', 'direct'),
      floorSingleVsProxy: pairing(of, 'floor-single', 'proxy'),
      stackOverFloorCpu: Object.fromEntries(
        [...HOLDFAST, 'holdfast'].map((k, i) => [
          k,
          paired(
            of,
            'stack',
            'floor',
            (s, f) => cpuPerCall(s, k) - cpuPerCall(f, FLOOR[i] ?? 'holdfast'),
          ),
        ]),
      ),
    };
  });
  const direct = phases.filter((p) => p.target === 'direct');
  const idle = (names: readonly string[]) =>
    Object.fromEntries(
      [...names, 'holdfast'].map((name) => [
        name,
        median(
          direct.map((p) =>
            name === 'holdfast'
              ? names.reduce((n, k) => n + (p.cpu[k] ?? NaN), 0) / p.windowSeconds
              : (p.cpu[name] ?? NaN) / p.windowSeconds,
          ),
        ),
      ]),
    );
  return {
    loads,
    idleHoldfastPerSecond: idle(HOLDFAST),
    idleFloorPerSecond: idle(FLOOR),
  };
}
