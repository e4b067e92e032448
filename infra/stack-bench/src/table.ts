import { HOLDFAST, type LoadSummary, type Summary, type TargetSummary } from './summary.js';

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
  'load generator': 'load generator',
  'bench runner': 'bench runner',
};

function comparison(l: LoadSummary): string {
  if (l.load.startsWith('closed')) return `${fmt(l.throughputRatio, 3)}x of direct`;
  return `${signed(l.addedP50, 2)} ms p50, ${signed(l.addedP99, 2)} ms p99`;
}

function latencyTable(s: Summary): string {
  const rows = [
    ['load', 'target', 'calls/s', 'p50 ms', 'p99 ms', 'errors', 'stack against direct'],
  ];
  for (const l of s.loads) {
    for (const [name, t] of [
      ['direct', l.direct],
      ['stack', l.stack],
    ] as const) {
      if (!t) continue;
      rows.push([
        l.load,
        name,
        fmt(t.perSecond),
        fmt(t.p50, 2),
        fmt(t.p99, 2),
        String(t.errors),
        name === 'stack' ? comparison(l) : '',
      ]);
    }
  }
  return columns(rows);
}

function perLoad(
  s: Summary,
  label: string,
  rows: ReadonlyArray<readonly [string, (t: TargetSummary) => string]>,
  which: 'stack' | 'direct',
): string {
  const loads = s.loads.filter((l) => l[which]);
  return columns([
    [label, ...loads.map((l) => l.load)],
    ...rows.map(([name, f]) => [name, ...loads.map((l) => f(l[which]!))]),
  ]);
}

/** CPU per call by process; the stack's rows only for stack phases. */
function cpuTable(s: Summary, which: 'stack' | 'direct'): string {
  const row = (k: string) =>
    [PROCESS_LABELS[k] ?? k, (t: TargetSummary) => fmt(t.cpuPerCall[k])] as const;
  const stackRows = which === 'stack' ? [...HOLDFAST.map(row), row('holdfast')] : [];
  return perLoad(
    s,
    `CPU µs per call, ${which}`,
    [
      ...stackRows,
      row('mock-upstream'),
      row('load generator'),
      ...(which === 'stack' ? [row('bench runner')] : []),
      ['machine busy', (t) => `${fmt(t.machineBusyShare * 100)}%`],
      ['other processes (cores)', (t) => fmt(t.othersCores, 2)],
    ],
    which,
  );
}

function natsTable(s: Summary): string {
  const clients = [
    ...new Set(s.loads.flatMap((l) => Object.keys(l.stack?.nats.byClient ?? {}))),
  ].sort();
  const io = (i: number, o: number) => `${fmt(i, 2)} / ${fmt(o, 2)}`;
  return perLoad(
    s,
    'NATS messages per call (in / out)',
    [
      ['nats-server', (t) => io(t.nats.inPerCall, t.nats.outPerCall)],
      ...clients.map(
        (c) =>
          [
            `  ${c}`,
            (t: TargetSummary) => {
              const x = t.nats.byClient[c];
              return x ? io(x.inPerCall, x.outPerCall) : '-';
            },
          ] as const,
      ),
      ['bytes per call', (t) => fmt(t.nats.bytesPerCall)],
    ],
    'stack',
  );
}

function redisTable(s: Summary): string {
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
      ...commands.map(
        (c) =>
          [
            c,
            (t: TargetSummary) => {
              const x = t.redis?.commands[c];
              return x ? `${fmt(x.callsPerCall, 2)} x ${fmt(x.usecPerCall, 1)}` : '-';
            },
          ] as const,
      ),
      ['Redis µs per call (commands sent)', (t) => fmt(t.redis?.usecPerGatewayCall, 1)],
      ...scripts.map(
        (name) =>
          [
            `  script ${name}: µs (Lua / n commands µs)`,
            (t: TargetSummary) => {
              const x = t.redis?.scripts[name];
              if (!x) return '-';
              const lua = x.usecPerCall - x.commandsUsecPerCall;
              return `${fmt(x.usecPerCall)} (${fmt(lua)} / ${fmt(x.commandsPerCall)} ${fmt(x.commandsUsecPerCall)})`;
            },
          ] as const,
      ),
    ],
    'stack',
  );
}

/** The whole report as printed. */
export function renderReport(s: Summary, header: string): string {
  const idle = s.idleHoldfastPerSecond;
  return [
    header,
    '',
    latencyTable(s),
    '',
    cpuTable(s, 'stack'),
    '',
    cpuTable(s, 'direct'),
    '',
    natsTable(s),
    '',
    redisTable(s),
    '',
    `Holdfast idle (while the calls went direct): ${fmt(idle.holdfast)} µs of CPU per second ` +
      `(${HOLDFAST.map((k) => `${k} ${fmt(idle[k])}`).join(', ')})`,
    '',
  ].join('\n');
}
