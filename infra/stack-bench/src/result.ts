import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import type { Flags } from './flags.js';
import type { PhaseResult } from './phase.js';
import { HOLDFAST, type Summary } from './summary.js';
import { columns, PROCESS_LABELS } from './table.js';

export const SCHEMA = 'holdfast.bench-stack.v2';
/** Before the bare proxy: a load's stack-against-direct figures sat on the load itself. */
const SCHEMA_V1 = 'holdfast.bench-stack.v1';

/** The JSON a run writes: enough to compare the next run with (`--against`). */
export interface BenchResult {
  schema: typeof SCHEMA;
  startedAt: string;
  finishedAt: string;
  /** `git describe --always --dirty` of the worktree measured. */
  commit: string;
  node: string;
  cores: number;
  /** 1-minute load average when the run started: how busy the shared machine was. */
  loadAverage: number;
  flags: Omit<Flags, 'help'>;
  summary: Summary;
  phases: PhaseResult[];
}

/** A figure as JSON holds it: NaN is written as null. */
const figure = z.number().nullable();

const V1 = z.looseObject({
  schema: z.literal(SCHEMA_V1),
  summary: z.looseObject({
    loads: z.array(z.looseObject({ throughputRatio: figure, addedP50: figure, addedP99: figure })),
  }),
});

/** What a run without a bare proxy has for the pairings it could not measure. */
const NOT_MEASURED = { throughputRatio: null, addedP50: null, addedP99: null };

/**
 * A parsed result in this version's shape: a v1 run's loads get their stack-against-direct
 * figures as `stackVsDirect`, and no proxy (null figures, as JSON writes NaN). Anything else
 * is returned as it is, for the caller to check.
 */
export function upcast(raw: unknown): unknown {
  const v1 = V1.safeParse(raw);
  if (!v1.success) return raw;
  const loads = v1.data.summary.loads.map(({ throughputRatio, addedP50, addedP99, ...rest }) => ({
    ...rest,
    stackVsDirect: { throughputRatio, addedP50, addedP99 },
    stackVsProxy: NOT_MEASURED,
    proxyVsDirect: NOT_MEASURED,
    edgeOverProxyCpu: null,
  }));
  return { ...v1.data, schema: SCHEMA, summary: { ...v1.data.summary, loads } };
}

const Pairing = z.object({ throughputRatio: figure, addedP50: figure, addedP99: figure });
const Target = z.object({
  perSecond: z.number(),
  cpuPerCall: z.record(z.string(), figure),
});

/** The part of an earlier result `--against` reads (older runs may lack newer fields). */
const Earlier = z.object({
  schema: z.literal(SCHEMA),
  startedAt: z.string(),
  commit: z.string(),
  summary: z.object({
    loads: z.array(
      z.object({
        load: z.string(),
        stackVsDirect: Pairing,
        stackVsProxy: Pairing,
        edgeOverProxyCpu: figure,
        proxy: Target.optional(),
        stack: Target.optional(),
      }),
    ),
  }),
});
type Earlier = z.infer<typeof Earlier>;

/** A result of this version or of v1 (upcast), as `--against` reads it. */
export async function readEarlier(path: string): Promise<Earlier> {
  const parsed = Earlier.safeParse(upcast(JSON.parse(await readFile(path, 'utf8'))));
  if (!parsed.success)
    throw new Error(`${path} is not a bench:stack result: ${parsed.error.message}`);
  return parsed.data;
}

const n = (x: number | null | undefined, d = 0) =>
  x === null || x === undefined || !Number.isFinite(x) ? '-' : x.toFixed(d);
const change = (before: number | null | undefined, now: number | undefined) =>
  before && now !== undefined && Number.isFinite(now) ? `${(now / before).toFixed(2)}x` : '-';

/** Each load's figures now against the earlier run's, as before -> now (now / before). */
export function renderComparison(earlier: Earlier, now: Summary): string {
  const blocks: string[] = [`Against ${earlier.commit} (${earlier.startedAt}):`];
  for (const l of now.loads) {
    const e = earlier.summary.loads.find((x) => x.load === l.load);
    if (!e || !l.stack) continue;
    const row = (label: string, before: number | null | undefined, after: number, d = 0) => [
      label,
      n(before, d),
      n(after, d),
      change(before, after),
    ];
    const closed = l.load.startsWith('closed');
    const cpu = (k: string) =>
      row(`${PROCESS_LABELS[k] ?? k} µs/call`, e.stack?.cpuPerCall[k], l.stack!.cpuPerCall[k]!);
    blocks.push(
      columns([
        [l.load, 'before', 'now', 'now/before'],
        row('calls/s', e.stack?.perSecond, l.stack.perSecond),
        closed
          ? row('x of direct', e.stackVsDirect.throughputRatio, l.stackVsDirect.throughputRatio, 3)
          : row('added p50 ms', e.stackVsDirect.addedP50, l.stackVsDirect.addedP50, 2),
        closed
          ? row('x of proxy', e.stackVsProxy.throughputRatio, l.stackVsProxy.throughputRatio, 3)
          : row('added p50 over proxy ms', e.stackVsProxy.addedP50, l.stackVsProxy.addedP50, 2),
        ...['holdfast', ...HOLDFAST].map(cpu),
        row('edge less bare proxy µs/call', e.edgeOverProxyCpu, l.edgeOverProxyCpu),
        row(
          'bare proxy µs/call',
          e.proxy?.cpuPerCall['bare-proxy'],
          l.proxy?.cpuPerCall['bare-proxy'] ?? NaN,
        ),
      ]),
    );
  }
  return `${blocks.join('\n\n')}\n`;
}
