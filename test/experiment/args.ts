import { parseArgs } from 'node:util';
import { env as envVar, natsNames, natsNamesEnv, stackDir } from '@holdfast/config';
import type { NatsNames } from '@holdfast/events';
import { readStackState } from '@holdfast/stack';
import { z } from 'zod';
import type { ExperimentOptions } from './experiment.js';
import { MODES, type Mode } from './run-config.js';

export const USAGE = `pnpm experiment [options]   reproduces seeds/000 against a running stack

Where the stack is (default: the running \`pnpm stack\`, from its stack.json; else localhost):
  --edge-url URL        the edge (env HOLDFAST_EDGE_URL; default http://127.0.0.1:8080)
  --nats-url URL        NATS, for the authority's config and usage (env NATS_URL; nats://127.0.0.1:4222)
  --mock-url URL        the mock upstream's controls (env HOLDFAST_MOCK_URL; http://127.0.0.1:8089)
  --upstream-url URL    the mock as the edge reaches it (default <mock-url>/v1; compose:
                        http://mock-upstream:8089/v1)
What to run:
  --modes LIST          meter,post,estimate,reserve (default all)
  --workers LIST        digest workers (default 4,16)
  --reps N              repetitions (default 3)
  --budget N            batch-summariser's month budget, tokens (default 40000)
  --sweep LIST|none     budgets of the sweep, post vs reserve (default 13000,20000,26000,33000,40000,50000)
  --sweep-workers N     workers in the sweep (default 16)
  --retry-after         also run a client that honours Retry-After
  --latency-ms N        the model's time to first token (default 200)
  --token-delay-ms N    between tokens (default 1)
  --json FILE           write every run's raw result
Fast: pnpm experiment --reps 1 --modes post,reserve --sweep none`;

export interface Cli {
  options: ExperimentOptions;
  edgeUrl: string;
  natsUrl: string;
  mockUrl: string;
  upstreamUrl: string;
  names: NatsNames;
  firstTokenLatencyMs: number;
  tokenDelayMs: number;
  json: string | undefined;
}

const list = (s: string) =>
  s
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
const ints = (name: string, s: string) =>
  list(s).map((x) => {
    const v = Number(x);
    if (!Number.isInteger(v) || v < 1) throw new Error(`--${name}: ${x} is not a positive integer`);
    return v;
  });

/** Flags, then environment, then the running `pnpm stack`'s stack.json, then localhost. */
export function parseCli(argv: string[], env: NodeJS.ProcessEnv): Cli | 'help' {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      'edge-url': { type: 'string' },
      'nats-url': { type: 'string' },
      'mock-url': { type: 'string' },
      'upstream-url': { type: 'string' },
      modes: { type: 'string', default: MODES.join(',') },
      workers: { type: 'string', default: '4,16' },
      reps: { type: 'string', default: '3' },
      budget: { type: 'string', default: '40000' },
      sweep: { type: 'string', default: '13000,20000,26000,33000,40000,50000' },
      'sweep-workers': { type: 'string', default: '16' },
      'retry-after': { type: 'boolean', default: false },
      'latency-ms': { type: 'string', default: '200' },
      'token-delay-ms': { type: 'string', default: '1' },
      json: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) return 'help';
  const modes = list(values.modes).map((m) => {
    if (!(MODES as readonly string[]).includes(m)) throw new Error(`--modes: unknown mode ${m}`);
    return m as Mode;
  });
  const stack = readStackState(stackDir(env));
  const mockUrl = values['mock-url'] ?? env.HOLDFAST_MOCK_URL ?? stack?.urls.mock;
  const fromStack = z.object(natsNamesEnv).parse({ ...stack?.natsNames, ...withoutEmpty(env) });
  const [reps] = ints('reps', values.reps);
  const [budget] = ints('budget', values.budget);
  const [sweepWorkers] = ints('sweep-workers', values['sweep-workers']);
  const latency = Number(values['latency-ms']);
  const delay = Number(values['token-delay-ms']);
  if (!(latency >= 0) || !(delay >= 0)) throw new Error('--latency-ms and --token-delay-ms: >= 0');
  const resolvedMock = mockUrl ?? 'http://127.0.0.1:8089';
  const nats = envVar
    .natsServers()
    .safeParse(values['nats-url'] ?? env.NATS_URL ?? stack?.urls.nats);
  if (!nats.success)
    throw new Error('--nats-url / NATS_URL: one or more comma-separated nats:// URLs');
  return {
    options: {
      modes,
      workers: ints('workers', values.workers),
      reps: reps!,
      budget: budget!,
      sweep: values.sweep === 'none' ? [] : ints('sweep', values.sweep),
      sweepWorkers: sweepWorkers!,
      retryAfter: values['retry-after'],
    },
    edgeUrl:
      values['edge-url'] ?? env.HOLDFAST_EDGE_URL ?? stack?.urls.edge ?? 'http://127.0.0.1:8080',
    natsUrl: nats.data.join(','),
    mockUrl: resolvedMock,
    upstreamUrl: values['upstream-url'] ?? `${resolvedMock}/v1`,
    names: natsNames(fromStack),
    firstTokenLatencyMs: latency,
    tokenDelayMs: delay,
    json: values.json,
  };
}

function withoutEmpty(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).filter(
      (e): e is [string, string] => typeof e[1] === 'string' && e[1] !== '',
    ),
  );
}
