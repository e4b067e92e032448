import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { natsNamesToEnv } from '@holdfast/config';
import { closesStream, type NatsNames, type TenantUsage } from '@holdfast/events';
import { startMockUpstream, type BehaviourPatch, type MockUpstream } from '@holdfast/mock-upstream';
import { AuthorityClient, connectNats, createLogger } from '@holdfast/runtime';
import {
  infraTest,
  readyPort,
  startService,
  waitFor,
  type ServiceProcess,
} from '@holdfast/testkit';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { sha256Hex } from '../src/index.js';

/** The four services, each a real child process that a test may kill -9. */
export type ServiceName = 'authority' | 'aggregator' | 'alerter' | 'edge';
const ORDER: ServiceName[] = ['authority', 'aggregator', 'alerter', 'edge'];
const MAIN: Record<ServiceName, string> = {
  authority: '../../budget-authority/dist/main.js',
  aggregator: '../../billing-aggregator/dist/main.js',
  alerter: '../../alerter/dist/main.js',
  edge: '../dist/main.js',
};

export const TENANT = 'load';
export const KEY = 'sk-hf-load-test-key-1';
export const CAP = 200;
export const PRICE = { inputPerMTok: 0.15, outputPerMTok: 0.6 };

/**
 * One reserve tenant, by default with room for every call (a refusal would only blur the
 * books); a test of refusals gives it a month `limit` of its own.
 */
function document(upstreamUrl: string, leaseMs: number, limit = 100_000_000) {
  return {
    upstreams: [{ id: 'default', baseUrl: upstreamUrl, timeoutMs: 10_000, maxRetries: 0 }],
    models: [{ id: 'gpt-4o-mini', upstream: 'default', tokenizer: 'o200k_base', price: PRICE }],
    tenants: [
      {
        id: TENANT,
        mode: 'reserve',
        leaseMs,
        budgets: [{ window: 'month', limit, unit: 'tokens' }],
        useCases: [{ id: 'UC-1', maxTokens: CAP, models: ['gpt-4o-mini'] }],
        keys: [{ id: 'load-1', sha256: sha256Hex(KEY) }],
      },
    ],
  };
}

export interface ProcessStackOptions {
  /** One server or several, comma-separated. */
  natsUrl: string;
  redisUrl: string;
  clickhouseUrl: string;
  iso: { names: NatsNames; keyPrefix: string; database: string };
  /** HOLDFAST_STREAM_REPLICAS of every service. */
  replicas?: number;
  behaviour?: BehaviourPatch;
  /** Lease of a hold (how long a dead edge's holds stay). */
  leaseMs?: number;
  /** The tenant's month budget in tokens (default: room for every call). */
  limit?: number;
}

export interface ProcessStack {
  upstream: MockUpstream;
  /** The edge's URL now (a restarted edge listens on a port of its own). */
  readonly edgeUrl: string;
  /** Connected to every NATS server of the test. */
  nc: NatsConnection;
  names: NatsNames;
  client: AuthorityClient;
  usage(): Promise<TenantUsage>;
  /** kill -9 of one service. */
  kill(name: ServiceName): Promise<void>;
  /** Starts a killed service again with the same environment; resolves when it is ready. */
  restart(name: ServiceName): Promise<void>;
  lines(name: ServiceName): string[];
  stop(): Promise<void>;
}

/**
 * The whole gateway as separate processes (authority, aggregator, alerter, edge) around an
 * in-process mock upstream, the way `pnpm stack` runs it, on the test's NATS, Redis and
 * ClickHouse database and names.
 */
export async function startProcessStack(o: ProcessStackOptions): Promise<ProcessStack> {
  const upstream = await startMockUpstream({ port: 0, behaviour: o.behaviour });
  const dir = await mkdtemp(join(tmpdir(), 'holdfast-processes-'));
  const configFile = join(dir, 'config.json');
  await writeFile(configFile, JSON.stringify(document(upstream.url, o.leaseMs ?? 6_000, o.limit)));
  // The edge binds a port of its own choosing (0) and logs it when ready: a port picked free
  // beforehand can be taken by another test's connection before the edge binds it (CI saw
  // EADDRINUSE). A restarted edge may get another port: read `edgeUrl` after a restart.
  let edgePort = 0;
  const common = {
    NATS_URL: o.natsUrl,
    HOLDFAST_STREAM_REPLICAS: String(o.replicas ?? 1),
    ...natsNamesToEnv(o.iso.names),
  };
  const env: Record<ServiceName, Record<string, string>> = {
    authority: {
      ...common,
      REDIS_URL: o.redisUrl,
      HOLDFAST_CONFIG: configFile,
      HOLDFAST_KEY_PREFIX: o.iso.keyPrefix,
      AUTHORITY_OPS_PORT: '0',
      AUTHORITY_RELAY_LEASE_MS: '1000',
      AUTHORITY_SWEEP_INTERVAL_MS: '200',
    },
    aggregator: {
      ...common,
      CLICKHOUSE_URL: o.clickhouseUrl,
      CLICKHOUSE_DATABASE: o.iso.database,
      BILLING_AGGREGATOR_OPS_PORT: '0',
      BILLING_AGGREGATOR_AUDIT_INTERVAL_MS: '0',
      BILLING_AGGREGATOR_FLUSH_INTERVAL_MS: '200',
      BILLING_AGGREGATOR_ACK_WAIT_MS: '5000',
    },
    alerter: { ...common, HOLDFAST_CONFIG: configFile, ALERTER_OPS_PORT: '0' },
    edge: { ...common, EDGE_PORT: '0', EDGE_HOST: '127.0.0.1' },
  };
  const procs = new Map<ServiceName, ServiceProcess>();
  const start = async (name: ServiceName) => {
    const entry = fileURLToPath(new URL(MAIN[name], import.meta.url));
    const proc = await startService(entry, env[name], { readyTimeoutMs: 30_000 });
    procs.set(name, proc);
    if (name === 'edge') edgePort = readyPort(proc, 'port');
  };
  const nc = await connectNats({
    servers: o.natsUrl,
    name: 'process-stack-test',
    logger: createLogger({ name: 'process-stack-test', level: 'silent' }),
  });
  const client = new AuthorityClient({ nc, names: o.iso.names, timeoutMs: 5_000 });
  const stop = async () => {
    for (const name of [...ORDER].reverse()) await procs.get(name)?.stop();
    await nc.close();
    await upstream.stop();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    for (const name of ORDER) await start(name);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    upstream,
    get edgeUrl() {
      return `http://127.0.0.1:${edgePort}`;
    },
    nc,
    names: o.iso.names,
    client,
    usage: async () => {
      const r = await client.usage({ tenant: TENANT });
      if (!r.ok) throw new Error(`usage failed: ${r.error.code}`);
      return r.value.tenants[0]!;
    },
    kill: async (name) => {
      await procs.get(name)?.crash();
    },
    restart: (name) => start(name),
    lines: (name) => procs.get(name)?.lines ?? [],
    stop,
  };
}

/**
 * infraTest plus `processStack(opts)`: the process stack on the test's NATS, Redis and
 * ClickHouse database (dropped afterwards), stopped after the test.
 */
export const processStackTest = infraTest.extend<{
  processStack: (opts?: Partial<ProcessStackOptions>) => Promise<ProcessStack>;
}>({
  processStack: async ({ natsUrl, redisUrl, clickhouseUrl, clickhouse, iso }, use) => {
    void clickhouse; // the test's database is dropped afterwards
    const started: ProcessStack[] = [];
    await use(async (opts = {}) => {
      const s = await startProcessStack({ natsUrl, redisUrl, clickhouseUrl, iso, ...opts });
      started.push(s);
      return s;
    });
    for (const s of started) await s.stop();
  },
});

/**
 * Waits until the books are final: no settle or release still owed to the authority (none
 * running at the edge, none waiting in the closes stream), then nothing held or in flight.
 * Nothing held is not enough: a hold whose lease ran out while its settle was retrying (the
 * authority away longer than the lease) holds nothing, and is billed at its worst case until
 * that settle lands, which the edge sends as soon as the restarted authority announces itself.
 * The order matters: a close the edge no longer has was taken or is in the stream, and one
 * no longer in the stream was applied.
 */
export async function quiet(s: ProcessStack, timeoutMs = 30_000): Promise<TenantUsage> {
  const jsm = await jetstreamManager(s.nc);
  const closes = closesStream(s.names).name;
  return waitFor(
    async () => {
      if ((await edgeGauge(s.edgeUrl, 'edge_hold_closes_pending')) > 0) return;
      if ((await jsm.streams.info(closes)).state.messages > 0) return;
      const u = await s.usage().catch(() => undefined);
      return u && u.inFlight === 0 && u.windows.every((w) => w.held === 0) ? u : undefined;
    },
    { timeoutMs, what: `${TENANT} to hold nothing and owe no close` },
  );
}

/** A gauge of the edge's /metrics with no labels but the service's; throws when it is not there. */
async function edgeGauge(edgeUrl: string, name: string): Promise<number> {
  const text = await (await fetch(`${edgeUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
  if (!line) throw new Error(`${name} not on the edge's /metrics`);
  return Number(line.slice(line.lastIndexOf(' ') + 1));
}
