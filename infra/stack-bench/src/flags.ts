import { parseArgs } from 'node:util';
import { z } from 'zod';

export const USAGE = `pnpm bench:stack [flags]

The whole stack (as pnpm stack runs it) in front of the mock upstream, the mock called
directly, a bare fastify + undici proxy in front of the mock (the proxy hop alone), and the
floor of the architecture (floor/: the least SPEC's flow can do, in the same processes, on the
same NATS, Redis and ClickHouse; its edge batching requests, and sending each alone),
interleaved over rounds. Prints a table and writes JSON (schema v2; --against and --medians
also read v1 results, from before the bare proxy, whose proxy figures show as -).

  --rounds N          rounds of every phase: direct, proxy, stack, floor, floor-single, the
                      order reversed each round (3)
  --seconds S         length of one phase (6)
  --connections N     closed loop: connections, each sending its next call when one ends (32)
  --rates R,R         open loop: fixed call rates per second (100,300)
  --stream            also a closed loop of streamed chat completions
  --completion-tokens tokens in each reply of the mock (16)
  --out PATH          where the JSON goes (default .tmp/bench-stack/<time>.json)
  --against PATH      a previous JSON to compare with
  --medians PATHS     no run: print the medians of earlier runs' JSON (a.json,b.json,c.json)
  --skip-floor        no floor processes, no floor phases
  --cpu-prof NAMES    services to run with node --cpu-prof (e.g. edge,authority,bare-proxy,
                      floor-edge); profiles land in the run's data dir, which is then kept
  --keep              keep the run's data dir (NATS store, Redis AOF, ClickHouse data)
  --help
`;

const PROFILED = [
  'edge',
  'authority',
  'aggregator',
  'alerter',
  'mock-upstream',
  'bare-proxy',
  'floor-edge',
  'floor-authority',
  'floor-aggregator',
  'floor-alerter',
] as const;

/** `a,b,c` as a list (empty items dropped). */
const csv = () => z.string().transform((s) => s.split(',').filter((x) => x.trim() !== ''));

const Flags = z.object({
  rounds: z.coerce.number().int().min(1).max(50).default(3),
  seconds: z.coerce.number().min(1).max(600).default(6),
  connections: z.coerce.number().int().min(1).max(1024).default(32),
  rates: csv()
    .transform((xs) => xs.map(Number))
    .pipe(z.array(z.number().min(1).max(20_000)))
    .default([100, 300]),
  stream: z.boolean().default(false),
  completionTokens: z.coerce.number().int().min(1).max(4096).default(16),
  out: z.string().min(1).optional(),
  against: z.string().min(1).optional(),
  medians: csv().optional(),
  cpuProf: csv()
    .pipe(z.array(z.enum(PROFILED)))
    .default([]),
  skipFloor: z.boolean().default(false),
  keep: z.boolean().default(false),
  help: z.boolean().default(false),
});
export type Flags = z.infer<typeof Flags>;

/** Parses the command line; throws with a readable message on an unknown or invalid flag. */
export function parseFlags(argv: string[]): Flags {
  const { values } = parseArgs({
    args: argv,
    options: {
      rounds: { type: 'string' },
      seconds: { type: 'string' },
      connections: { type: 'string' },
      rates: { type: 'string' },
      stream: { type: 'boolean' },
      'completion-tokens': { type: 'string' },
      out: { type: 'string' },
      against: { type: 'string' },
      medians: { type: 'string' },
      'cpu-prof': { type: 'string' },
      'skip-floor': { type: 'boolean' },
      keep: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
    allowPositionals: false,
  });
  const parsed = Flags.safeParse({
    ...values,
    completionTokens: values['completion-tokens'],
    cpuProf: values['cpu-prof'],
    skipFloor: values['skip-floor'],
  });
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `--${i.path.join('.')}: ${i.message}`);
    throw new Error(issues.join('\n'));
  }
  return parsed.data;
}
