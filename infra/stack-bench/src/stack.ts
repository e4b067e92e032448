import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  PROCESS_ORDER,
  ProcessGroup,
  REPO_ROOT,
  loadSettings,
  startStack,
  type ProcessSpec,
} from '@holdfast/stack';
import { freePort } from '@holdfast/testkit/infra';

export const BENCH_DIR = join(REPO_ROOT, '.tmp/bench-stack');
export const BENCH_KEY = 'sk-hf-bench-stack';
const CONFIG = fileURLToPath(new URL('../bench-config.yaml', import.meta.url));
const BARE_PROXY_ENTRY = fileURLToPath(new URL('./bare-proxy/main.js', import.meta.url));
const FLOOR_ENTRY = fileURLToPath(new URL('./floor/main.js', import.meta.url));

/** The floor's processes (floor/main.ts), in start order: the edge last, as the stack's. */
const FLOOR_PROCESSES = [
  'floor-authority',
  'floor-aggregator',
  'floor-alerter',
  'floor-edge',
] as const;

/** The stack's processes, and the bench's bare proxy and floor started beside them. */
type BenchProcess =
  (typeof PROCESS_ORDER)[number] | 'bare-proxy' | (typeof FLOOR_PROCESSES)[number];

/** Variables of the caller that would point the stack elsewhere than its own fresh servers. */
const NOT_PASSED = [
  'NATS_URL',
  'REDIS_URL',
  'CLICKHOUSE_URL',
  'OPENAI_API_KEY',
  'OPENAI_BASE_URL',
  'HOLDFAST_CONFIG',
  'HOLDFAST_STACK_DIR',
  'NODE_OPTIONS',
];

export interface StackOptions {
  /** The run's data dir (NATS store, Redis AOF, ClickHouse data, profiles). */
  dir: string;
  completionTokens: number;
  /** Services started with `node --cpu-prof` (profiles in `<dir>/profiles`). */
  cpuProf: readonly string[];
  /** Start the floor's processes too (default true). */
  floor?: boolean;
}

export interface BenchStack {
  pids: Record<BenchProcess, number>;
  edgeUrl: string;
  mockUrl: string;
  /** The bare proxy (bare-proxy/app.ts) in front of the mock. */
  proxyUrl: string;
  /** The floor's edge (floor/edge.ts); undefined when the floor was not started. */
  floorUrl: string | undefined;
  redisUrl: string;
  natsMonitorUrl: string;
  group: ProcessGroup;
}

/** Keeps the last `size` lines of each process and drops the rest (the edge logs every call). */
function lineTails(size: number) {
  const tails = new Map<string, string[]>();
  const sink = (name: string, line: string) => {
    let t = tails.get(name);
    if (!t) tails.set(name, (t = []));
    t.push(line);
    if (t.length > size) t.shift();
  };
  return { sink, tail: (name: string) => tails.get(name) ?? [] };
}

/** `pnpm stack`'s process group, with node --cpu-prof added to the services asked for. */
class BenchGroup extends ProcessGroup {
  constructor(
    sink: (name: string, line: string) => void,
    private readonly profiled: readonly string[],
    private readonly profileDir: string,
  ) {
    super(sink);
  }

  override start(spec: ProcessSpec): ReturnType<ProcessGroup['start']> {
    if (!this.profiled.includes(spec.name)) return super.start(spec);
    // Node does not take --cpu-prof from NODE_OPTIONS: the services run as `node <entry>`.
    const flags = [
      '--cpu-prof',
      `--cpu-prof-dir=${this.profileDir}`,
      `--cpu-prof-name=${spec.name}.cpuprofile`,
    ];
    return super.start({ ...spec, args: [...flags, ...spec.args] });
  }
}

async function readyz(url: string): Promise<boolean> {
  const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2_000) }).catch(
    () => undefined,
  );
  await res?.body?.cancel();
  return res?.status === 200;
}

/** The bare proxy as one more process of the group: stopped with it, its pid known. */
function bareProxySpec(port: number, mockUrl: string): ProcessSpec {
  const url = `http://127.0.0.1:${port}`;
  return {
    name: 'bare-proxy',
    command: process.execPath,
    args: [BARE_PROXY_ENTRY],
    env: {
      PATH: process.env.PATH,
      BARE_PROXY_HOST: '127.0.0.1',
      BARE_PROXY_PORT: String(port),
      BARE_PROXY_UPSTREAM: new URL(mockUrl).origin,
    },
    ready: { probe: () => readyz(url) },
    readyTimeoutMs: 20_000,
    stopTimeoutMs: 10_000,
  };
}

/**
 * One of the floor's processes on the stack's NATS, Redis and ClickHouse; up once it printed
 * `ready` (`printed` is told each line).
 */
function floorSpec(
  name: (typeof FLOOR_PROCESSES)[number],
  env: NodeJS.ProcessEnv,
  printed: (name: string) => boolean,
): ProcessSpec {
  return {
    name,
    command: process.execPath,
    args: [FLOOR_ENTRY, name.slice('floor-'.length)],
    env: { PATH: process.env.PATH, ...env },
    ready: { probe: () => Promise.resolve(printed(name)) },
    readyTimeoutMs: 20_000,
    stopTimeoutMs: 10_000,
  };
}

/**
 * The whole stack as `pnpm stack` starts it (infra/stack's code: the same processes, flags and
 * start order), in a data dir of the run's own and on free ports only, with the bench config,
 * the mock at zero latency replying `completionTokens` tokens, and NATS monitoring on; then
 * the bare proxy in front of the mock, and the floor's processes (floor/) on the stack's
 * servers, last, so they are stopped first.
 * The caller stops `group` (also when this throws).
 */
export async function startBenchStack(o: StackOptions): Promise<{
  group: ProcessGroup;
  started: Promise<BenchStack>;
  /** The last lines each process wrote (what a failure report shows). */
  tail: (name: string) => string[];
}> {
  const ports = {
    EDGE_PORT: await freePort(),
    MOCK_UPSTREAM_PORT: await freePort(),
    AUTHORITY_OPS_PORT: await freePort(),
    BILLING_AGGREGATOR_OPS_PORT: await freePort(),
    ALERTER_OPS_PORT: await freePort(),
    HOLDFAST_NATS_MONITOR_PORT: await freePort(),
  };
  const bareProxyPort = await freePort();
  const floorPort = await freePort();
  const source: NodeJS.ProcessEnv = { ...process.env };
  for (const name of NOT_PASSED) delete source[name];
  for (const name of Object.keys(source))
    if (name.startsWith('MOCK_UPSTREAM_')) delete source[name];
  Object.assign(source, {
    ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])),
    HOLDFAST_STACK_DIR: o.dir,
    HOLDFAST_CONFIG: CONFIG,
    HOLDFAST_STACK_FREE_PORTS: 'true',
    HOLDFAST_STACK_HOST: '127.0.0.1',
    MOCK_UPSTREAM_FIRST_TOKEN_MS: '0',
    MOCK_UPSTREAM_TOKEN_DELAY_MS: '0',
    MOCK_UPSTREAM_COMPLETION: `fixed:${o.completionTokens}`,
    // As pnpm stack runs it; the services also log "ready" at info, which the stack waits for.
    LOG_LEVEL: 'info',
  });
  const settings = loadSettings(source);
  const profileDir = join(o.dir, 'profiles');
  if (o.cpuProf.length > 0) await mkdir(profileDir, { recursive: true });
  const logs = lineTails(40);
  const ready = new Set<string>();
  const sink = (name: string, line: string) => {
    if (line === 'ready') ready.add(name);
    logs.sink(name, line);
  };
  const group = new BenchGroup(sink, o.cpuProf, profileDir);
  const withFloor = o.floor ?? true;
  const started = startStack(settings, group).then(async (stack): Promise<BenchStack> => {
    await group.start(bareProxySpec(bareProxyPort, stack.state.urls.mock));
    const { urls } = stack.state;
    const floorEnv = {
      NATS_URL: urls.nats,
      REDIS_URL: urls.redis,
      CLICKHOUSE_URL: urls.clickhouse,
      FLOOR_HOST: '127.0.0.1',
      FLOOR_PORT: String(floorPort),
      FLOOR_UPSTREAM: new URL(urls.mock).origin,
    };
    for (const name of withFloor ? FLOOR_PROCESSES : []) {
      await group.start(floorSpec(name, floorEnv, (n) => ready.has(n)));
    }
    const pid = (name: BenchProcess) => {
      const p = group.processes.find((x) => x.name === name);
      if (!p) throw new Error(`${name} is not one of the bench's processes`);
      return p.pid;
    };
    const names: BenchProcess[] = [
      ...PROCESS_ORDER,
      'bare-proxy',
      ...(withFloor ? FLOOR_PROCESSES : []),
    ];
    const pids = Object.fromEntries(names.map((n) => [n, pid(n)])) as BenchStack['pids'];
    return {
      pids,
      edgeUrl: stack.state.urls.edge,
      mockUrl: stack.state.urls.mock,
      proxyUrl: `http://127.0.0.1:${bareProxyPort}`,
      floorUrl: withFloor ? `http://127.0.0.1:${floorPort}` : undefined,
      redisUrl: stack.state.urls.redis,
      natsMonitorUrl: `http://127.0.0.1:${ports.HOLDFAST_NATS_MONITOR_PORT}`,
      group,
    };
  });
  return { group, started, tail: logs.tail };
}
