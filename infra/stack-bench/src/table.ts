import type { TargetName } from './phase.js';
import {
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
  'load generator': 'load generator',
  'bench runner': 'bench runner',
};

/** `0.080x of direct` for a closed loop, the added p50 and p99 for an open one. */
function comparison(load: string, p: Pairing, other: string): string {
  if (load.startsWith('closed')) return `${fmt(p.throughputRatio, 3)}x of ${other}`;
  return `${signed(p.addedP50, 2)} ms p50, ${signed(p.addedP99, 2)} ms p99`;
}

/** Calls/s and latency by load and target; the stack against proxy column when a proxy ran. */
function latencyTable(s: Summary): string {
  const withProxy = s.loads.some((l) => l.proxy);
  const header = ['load', 'target', 'calls/s', 'p50 ms', 'p99 ms', 'errors', 'against direct'];
  const rows = [withProxy ? [...header, 'stack against proxy'] : header];
  for (const l of s.loads) {
    for (const [name, t] of [
      ['direct', l.direct],
      ['proxy', l.proxy],
      ['stack', l.stack],
    ] as const) {
      if (!t) continue;
      const vsDirect = { direct: undefined, proxy: l.proxyVsDirect, stack: l.stackVsDirect }[name];
      const row = [
        l.load,
        name,
        fmt(t.perSecond),
        fmt(t.p50, 2),
        fmt(t.p99, 2),
        String(t.errors),
        vsDirect ? comparison(l.load, vsDirect, 'direct') : '',
      ];
      if (withProxy) {
        row.push(name === 'stack' && l.proxy ? comparison(l.load, l.stackVsProxy, 'proxy') : '');
      }
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
};

/**
 * CPU per call by process: the stack's rows (and the edge's CPU less the bare proxy's, paired
 * by round) only for stack phases, the bare proxy's only for proxy phases.
 */
function cpuTable(s: Summary, which: TargetName): string | undefined {
  const row = (k: string): Row => [PROCESS_LABELS[k] ?? k, (t) => fmt(t.cpuPerCall[k])];
  const edgeOverProxy: Row = ['  edge less bare proxy', (_, l) => fmt(l.edgeOverProxyCpu)];
  const own: Row[] = {
    stack: [
      row('edge'),
      ...(s.loads.some((l) => l.proxy) ? [edgeOverProxy] : []),
      ...HOLDFAST.slice(1).map(row),
      row('holdfast'),
    ],
    proxy: [row('bare-proxy')],
    direct: [],
  }[which];
  return perLoad(
    s,
    `CPU µs per call, ${TARGET_LABELS[which]}`,
    [
      ...own,
      row('mock-upstream'),
      row('load generator'),
      ...(which === 'stack' ? [row('bench runner')] : []),
      ['machine busy', (t) => `${fmt(t.machineBusyShare * 100)}%`],
      ['other processes (cores)', (t) => fmt(t.othersCores, 2)],
    ],
    which,
  );
}

/** Read and write system calls per call by process, for the stack's phases. */
function syscallsTable(s: Summary): string | undefined {
  if (!s.loads.some((l) => l.stack?.syscallsPerCall)) return undefined;
  const row = (k: string): Row => [
    PROCESS_LABELS[k] ?? k,
    (t) => {
      const x = t.syscallsPerCall?.[k];
      return x ? `${fmt(x.reads, 2)} / ${fmt(x.writes, 2)}` : '-';
    },
  ];
  return perLoad(
    s,
    'System calls per call (reads / writes)',
    [...HOLDFAST.map(row), row('holdfast'), row('mock-upstream')],
    'stack',
  );
}

function natsTable(s: Summary): string | undefined {
  const clients = [
    ...new Set(s.loads.flatMap((l) => Object.keys(l.stack?.nats.byClient ?? {}))),
  ].sort();
  const io = (i: number, o: number) => `${fmt(i, 2)} / ${fmt(o, 2)}`;
  return perLoad(
    s,
    'NATS messages per call (in / out)',
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
    'stack',
  );
}

function redisTable(s: Summary): string | undefined {
  const withRedis = s.loads.filter((l) => l.stack?.redis);
  const commands = [
    ...new Set(withRedis.flatMap((l) => Object.keys(l.stack!.redis!.commands))),
  ].sort();
  const scripts = [
    ...new Set(withRedis.flatMap((l) => Object.keys(l.stack!.redis!.scripts))),
  ].sort();
  return perLoad(
    s,
    'Redis per call (calls x µs each)',
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
    'stack',
  );
}

/** The whole report as printed (a table no phase fed is left out). */
export function renderReport(s: Summary, header: string): string {
  const idle = s.idleHoldfastPerSecond;
  const tables = [
    latencyTable(s),
    cpuTable(s, 'stack'),
    cpuTable(s, 'proxy'),
    cpuTable(s, 'direct'),
    syscallsTable(s),
    natsTable(s),
    redisTable(s),
  ].filter((t) => t !== undefined);
  return [
    header,
    '',
    ...tables.flatMap((t) => [t, '']),
    `Holdfast idle (while the calls went direct): ${fmt(idle.holdfast)} µs of CPU per second ` +
      `(${HOLDFAST.map((k) => `${k} ${fmt(idle[k])}`).join(', ')})`,
    '',
  ].join('\n');
}
