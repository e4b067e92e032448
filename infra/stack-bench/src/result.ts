import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import type { Flags } from './flags.js';
import type { PhaseResult } from './phase.js';
import { HOLDFAST, type Summary } from './summary.js';
import { columns, PROCESS_LABELS } from './table.js';

export const SCHEMA = 'holdfast.bench-stack.v1';

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

/** The part of an earlier result `--against` reads (older runs may lack newer fields). */
const Earlier = z.object({
  schema: z.literal(SCHEMA),
  startedAt: z.string(),
  commit: z.string(),
  summary: z.object({
    loads: z.array(
      z.object({
        load: z.string(),
        throughputRatio: z.number().nullable(),
        addedP50: z.number().nullable(),
        addedP99: z.number().nullable(),
        stack: z
          .object({
            perSecond: z.number(),
            cpuPerCall: z.record(z.string(), z.number().nullable()),
          })
          .optional(),
      }),
    ),
  }),
});
type Earlier = z.infer<typeof Earlier>;

export async function readEarlier(path: string): Promise<Earlier> {
  const parsed = Earlier.safeParse(JSON.parse(await readFile(path, 'utf8')));
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
    const rows: string[][] = [[l.load, 'before', 'now', 'now/before']];
    const cpu = (k: string) => [
      `${PROCESS_LABELS[k] ?? k} µs/call`,
      n(e.stack?.cpuPerCall[k]),
      n(l.stack!.cpuPerCall[k]),
      change(e.stack?.cpuPerCall[k], l.stack!.cpuPerCall[k]),
    ];
    rows.push(
      [
        'calls/s',
        n(e.stack?.perSecond),
        n(l.stack.perSecond),
        change(e.stack?.perSecond, l.stack.perSecond),
      ],
      l.load.startsWith('closed')
        ? [
            'x of direct',
            n(e.throughputRatio, 3),
            n(l.throughputRatio, 3),
            change(e.throughputRatio, l.throughputRatio),
          ]
        : ['added p50 ms', n(e.addedP50, 2), n(l.addedP50, 2), change(e.addedP50, l.addedP50)],
      ...['holdfast', ...HOLDFAST].map(cpu),
    );
    blocks.push(columns(rows));
  }
  return `${blocks.join('\n\n')}\n`;
}
