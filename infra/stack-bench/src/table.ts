import { BUDGETED, type TargetName } from './phase.js';
import {
  allOf,
  FLOOR,
  HOLDFAST,
  type LoadSummary,
  type Pairing,
  type Summary,
  type TargetSummary,
} from './summary.js';

/** Text columns: the first left-aligned, the others right-aligned. */
export function columns(rows: ReadonlyArray<readonly string[]>): string {
  const widths: number[] = [];
  for (const row of rows) row.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)));
  return rows
    .map((row) =>
      row
        .map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

const fmt = (x: number | undefined, digits = 0) =>
  x === undefined || !Number.isFinite(x)
    ? '-'
    : x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const signed = (x: number, digits: number) => `${x >= 0 ? '+' : ''}${fmt(x, digits)}`;

export const PROCESS_LABELS: Record<string, string> = {
  edge: 'edge',
  authority: 'budget authority',
  nats: 'nats-server',
  redis: 'redis-server',
  alerter: 'alerter',
  aggregator: 'billing aggregator',
  clickhouse: 'clickhouse-server',
  holdfast: 'all of Holdfast',
  'mock-upstream': 'mock upstream',
  'bare-proxy': 'bare proxy',
  'floor-edge': 'floor edge',
  'floor-authority': 'floor authority (and relay)',
  'floor-alerter': 'floor alerter',
  'floor-aggregator': 'floor aggregator',
  'load generator': 'load generator',
  'bench runner': 'bench runner',
};

/** `0.080x of direct` for a closed loop, the added p50 and p99 for an open one. */
function comparison(load: string, p: Pairing, other: string): string {
  if (load.startsWith('closed')) return `${fmt(p.throughputRatio, 3)}x of ${other}`;
  return `${signed(p.addedP50, 2)} ms p50, ${signed(p.addedP99, 2)} ms p99`;
}

const TARGETS_SHOWN: readonly TargetName[] = ['direct', 'proxy', 'stack', 'floor', 'floor-single'];

/** A target's pairing against direct and against the bare proxy (none for direct). */
function against(l: LoadSummary, t: TargetName): { direct?: Pairing; proxy?: Pairing } {
  return {
    direct: {},
    proxy: { direct: l.proxyVsDirect },
    stack: { direct: l.stackVsDirect, proxy: l.stackVsProxy },
    floor: { direct: l.floorVsDirect, proxy: l.floorVsProxy },
    'floor-single': { direct: l.floorSingleVsDirect, proxy: l.floorSingleVsProxy },
  }[t];
}

/** Calls/s and latency by load and target; an against-proxy column when a proxy ran. */
function latencyTable(s: Summary): string {
  const withProxy = s.loads.some((l) => l.proxy);
  const header = ['load', 'target', 'calls/s', 'p50 ms', 'p99 ms', 'errors', 'against direct'];
  const rows = [withProxy ? [...header, 'against proxy'] : header];
  for (const l of s.loads) {
    for (const name of TARGETS_SHOWN) {
      const t = l[name];
      if (!t) continue;
      const vs = against(l, name);
      const row = [
        l.load,
        name,
        fmt(t.perSecond),
        fmt(t.p50, 2),
        fmt(t.p99, 2),
        String(t.errors),
        vs.direct ? comparison(l.load, vs.direct, 'direct') : '',
      ];
      if (withProxy) row.push(vs.proxy && l.proxy ? comparison(l.load, vs.proxy, 'proxy') : '');
      rows.push(row);
    }
  }
  return columns(rows);
}

type Row = readonly [string, (t: TargetSummary, l: LoadSummary) => string];

/** One column per load that ran `which`; undefined when none did. */
function perLoad(
  s: Summary,
  label: string,
  rows: readonly Row[],
  which: TargetName,
): string | undefined {
  const loads = s.loads.filter((l) => l[which]);
  if (loads.length === 0) return undefined;
  return columns([
    [label, ...loads.map((l) => l.load)],
    ...rows.map(([name, f]) => [name, ...loads.map((l) => f(l[which]!, l))]),
  ]);
}

const TARGET_LABELS: Record<TargetName, string> = {
  direct: 'direct',
  proxy: 'bare proxy',
  stack: 'stack',
  floor: 'floor (batched)',
  'floor-single': 'floor (each request alone)',
};

/**
 * CPU per call by process: the stack's rows (and the edge's CPU less the bare proxy's, paired
 * by round) only for stack phases, the bare proxy's only for proxy phases, the floor's for
 * floor phases.
 */
function cpuTable(s: Summary, which: TargetName): string | undefined {
  const row = (k: string): Row => [PROCESS_LABELS[k] ?? k, (t) => fmt(t.cpuPerCall[k])];
  const edgeOverProxy: Row = ['  edge less bare proxy', (_, l) => fmt(l.edgeOverProxyCpu)];
  const floor = [...FLOOR.map(row), row('holdfast')];
  const own: Row[] = {
    stack: [
      row('edge'),
      ...(s.loads.some((l) => l.proxy) ? [edgeOverProxy] : []),
      ...HOLDFAST.slice(1).map(row),
      row('holdfast'),
    ],
    proxy: [row('bare-proxy')],
    direct: [],
    floor,
    'floor-single': floor,
  }[which];
  return perLoad(
    s,
    `CPU µs per call, ${TARGET_LABELS[which]}`,
    [
      ...own,
      row('mock-upstream'),
      row('load generator'),
      ...(BUDGETED.includes(which) ? [row('bench runner')] : []),
      ['machine busy', (t) => `${fmt(t.machineBusyShare * 100)}%`],
      ['other processes (cores)', (t) => fmt(t.othersCores, 2)],
    ],
    which,
  );
}

const ROLE_LABELS: Record<(typeof HOLDFAST)[number], string> = {
  edge: 'edge',
  authority: 'authority (and relay)',
  nats: 'nats-server',
  redis: 'redis-server',
  alerter: 'alerter',
  aggregator: 'aggregator',
  clickhouse: 'clickhouse-server',
};

/**
 * One load's stack beside the floor, process by process of the same role (the floor's edge
 * beside the edge, ...): CPU per call, the stack less the (batched) floor paired by round,
 * and the floor's share of the stack; then calls/s, latency, messages and system calls.
 */
function floorTable(l: LoadSummary): string | undefined {
  const { stack, floor } = l;
  const single = l['floor-single'];
  if (!stack || !floor) return undefined;
  const targets = [stack, floor, ...(single ? [single] : [])];
  const cells = (f: (t: TargetSummary) => string) => targets.map(f);
  const cpu = (k: string, i: number) => (t: TargetSummary) =>
    fmt(t.cpuPerCall[t === stack ? k : (FLOOR[i] ?? 'holdfast')]);
  const share = (t: TargetSummary) =>
    t === stack ? '' : `${fmt((t.cpuPerCall.holdfast! / stack.cpuPerCall.holdfast!) * 100)}%`;
  const io = (i: number, o: number) => `${fmt(i, 2)} / ${fmt(o, 2)}`;
  const calls = (t: TargetSummary) => {
    const x = t.syscallsPerCall?.holdfast;
    return x ? io(x.reads, x.writes) : '-';
  };
  const rows = [
    [
      `${l.load}: stack beside the floor`,
      'stack',
      'floor',
      ...(single ? ['floor, single'] : []),
      'stack less floor',
    ],
    ...[...HOLDFAST, 'holdfast' as const].map((k, i) => [
      k === 'holdfast' ? 'all of Holdfast, CPU µs per call' : `${ROLE_LABELS[k]} µs`,
      ...cells(cpu(k, i)),
      fmt(l.stackOverFloorCpu?.[k]),
    ]),
    ["  floor's share of the stack", ...cells(share), ''],
    ['calls/s', ...cells((t) => fmt(t.perSecond)), ''],
    ['p50 / p99 ms', ...cells((t) => `${fmt(t.p50, 2)} / ${fmt(t.p99, 2)}`), ''],
    [
      'NATS messages per call (in / out)',
      ...cells((t) => io(t.nats.inPerCall, t.nats.outPerCall)),
      '',
    ],
    ['system calls per call (reads / writes)', ...cells(calls), ''],
    ['Redis µs per call (commands sent)', ...cells((t) => fmt(t.redis?.usecPerGatewayCall, 1)), ''],
  ];
  return columns(rows);
}

/** Read and write system calls per call by process, for the stack's or a floor's phases. */
function syscallsTable(s: Summary, which: TargetName): string | undefined {
  if (!s.loads.some((l) => l[which]?.syscallsPerCall)) return undefined;
  const row = (k: string): Row => [
    PROCESS_LABELS[k] ?? k,
    (t) => {
      const x = t.syscallsPerCall?.[k];
      return x ? `${fmt(x.reads, 2)} / ${fmt(x.writes, 2)}` : '-';
    },
  ];
  return perLoad(
    s,
    `System calls per call (reads / writes), ${TARGET_LABELS[which]}`,
    [...allOf(which).map(row), row('holdfast'), row('mock-upstream')],
    which,
  );
}

function natsTable(s: Summary, which: TargetName): string | undefined {
  const clients = [
    ...new Set(s.loads.flatMap((l) => Object.keys(l[which]?.nats.byClient ?? {}))),
  ].sort();
  const io = (i: number, o: number) => `${fmt(i, 2)} / ${fmt(o, 2)}`;
  return perLoad(
    s,
    `NATS messages per call (in / out), ${TARGET_LABELS[which]}`,
    [
      ['nats-server', (t) => io(t.nats.inPerCall, t.nats.outPerCall)],
      ...clients.map((c): Row => [
        `  ${c}`,
        (t) => {
          const x = t.nats.byClient[c];
          return x ? io(x.inPerCall, x.outPerCall) : '-';
        },
      ]),
      ['bytes per call', (t) => fmt(t.nats.bytesPerCall)],
    ],
    which,
  );
}

function redisTable(s: Summary, which: TargetName): string | undefined {
  const withRedis = s.loads.filter((l) => l[which]?.redis);
  const commands = [
    ...new Set(withRedis.flatMap((l) => Object.keys(l[which]!.redis!.commands))),
  ].sort();
  const scripts = [
    ...new Set(withRedis.flatMap((l) => Object.keys(l[which]!.redis!.scripts))),
  ].sort();
  return perLoad(
    s,
    `Redis per call (calls x µs each), ${TARGET_LABELS[which]}`,
    [
      ...commands.map((c): Row => [
        c,
        (t) => {
          const x = t.redis?.commands[c];
          return x ? `${fmt(x.callsPerCall, 2)} x ${fmt(x.usecPerCall, 1)}` : '-';
        },
      ]),
      ['Redis µs per call (commands sent)', (t) => fmt(t.redis?.usecPerGatewayCall, 1)],
      ...scripts.map((name): Row => [
        `  script ${name}: µs (Lua / n commands µs)`,
        (t) => {
          const x = t.redis?.scripts[name];
          if (!x) return '-';
          const lua = x.usecPerCall - x.commandsUsecPerCall;
          return `${fmt(x.usecPerCall)} (${fmt(lua)} / ${fmt(x.commandsPerCall)} ${fmt(x.commandsUsecPerCall)})`;
        },
      ]),
    ],
    which,
  );
}

/** The whole report as printed (a table no phase fed is left out). */
export function renderReport(s: Summary, header: string): string {
  const idle = s.idleHoldfastPerSecond;
  const floorIdle = s.idleFloorPerSecond;
  const budgeted = ['stack', 'floor', 'floor-single'] as const;
  const tables = [
    latencyTable(s),
    ...s.loads.map(floorTable),
    ...(['stack', 'proxy', 'direct', 'floor', 'floor-single'] as const).map((t) => cpuTable(s, t)),
    ...budgeted.map((t) => syscallsTable(s, t)),
    ...budgeted.map((t) => natsTable(s, t)),
    ...budgeted.map((t) => redisTable(s, t)),
  ].filter((t) => t !== undefined);
  const idleLine = (what: string, x: Record<string, number>, names: readonly string[]) =>
    `${what} idle (while the calls went direct): ${fmt(x.holdfast)} µs of CPU per second ` +
    `(${names.map((k) => `${k} ${fmt(x[k])}`).join(', ')})`;
  return [
    header,
    '',
    ...tables.flatMap((t) => [t, '']),
    idleLine('Holdfast', idle, HOLDFAST),
    ...(floorIdle && s.loads.some((l) => l.floor) ? [idleLine('The floor', floorIdle, FLOOR)] : []),
    '',
  ].join('\n');
}
