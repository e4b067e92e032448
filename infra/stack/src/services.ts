import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { REPO_ROOT } from './env.js';
import { StartError, type ProcessSpec } from './process.js';

/** Where the stack's infra is, as the services get it. */
interface InfraUrls {
  nats: string;
  redis: string;
  clickhouse: string;
}

export interface ServicePorts {
  edge: number;
  mock: number;
  authority: number;
  aggregator: number;
  alerter: number;
}

export interface ServiceInputs {
  urls: InfraUrls;
  ports: ServicePorts;
  host: string;
  configPath: string;
  /** What the edge calls for the config's `baseUrlEnv: OPENAI_BASE_URL` upstream. */
  upstreamBaseUrl: string;
  /** ... and for its `baseUrlEnv: ANTHROPIC_BASE_URL` one. */
  anthropicBaseUrl: string;
  /** The edge's EDGE_ADMIN_TOKEN: the admin API is on in a stack. */
  adminToken: string;
  /** The caller's environment (LOG_LEVEL, NATS names, tunables) passed to every service. */
  baseEnv: NodeJS.ProcessEnv;
  /** `urls.redis` is a Redis Cluster: the authority waits for a replica per write (WAIT 1). */
  redisCluster?: boolean;
}

/** The Holdfast processes in start order; each answers 200 on `/readyz` once it is up. */
export type ServiceName = 'mock-upstream' | 'authority' | 'aggregator' | 'alerter' | 'edge';

const ENTRIES: Record<ServiceName, string> = {
  'mock-upstream': 'infra/mock-upstream/dist/main.js',
  authority: 'services/budget-authority/dist/main.js',
  aggregator: 'services/billing-aggregator/dist/main.js',
  alerter: 'services/alerter/dist/main.js',
  edge: 'services/edge/dist/main.js',
};

function serviceEnv(name: ServiceName, i: ServiceInputs): NodeJS.ProcessEnv {
  const { urls, ports, host } = i;
  switch (name) {
    case 'mock-upstream':
      return { MOCK_UPSTREAM_PORT: String(ports.mock), MOCK_UPSTREAM_HOST: host };
    case 'authority':
      return {
        NATS_URL: urls.nats,
        REDIS_URL: urls.redis,
        ...(i.redisCluster
          ? {
              REDIS_CLUSTER: 'true',
              AUTHORITY_REDIS_WAIT_REPLICAS: i.baseEnv.AUTHORITY_REDIS_WAIT_REPLICAS ?? '1',
            }
          : {}),
        HOLDFAST_CONFIG: i.configPath,
        AUTHORITY_OPS_PORT: String(ports.authority),
      };
    case 'aggregator':
      return {
        NATS_URL: urls.nats,
        CLICKHOUSE_URL: urls.clickhouse,
        BILLING_AGGREGATOR_OPS_PORT: String(ports.aggregator),
      };
    case 'alerter':
      // No HOLDFAST_CONFIG: the alerter then follows the config the authority applies.
      return { NATS_URL: urls.nats, ALERTER_OPS_PORT: String(ports.alerter) };
    case 'edge':
      return {
        NATS_URL: urls.nats,
        EDGE_PORT: String(ports.edge),
        EDGE_HOST: host,
        OPENAI_BASE_URL: i.upstreamBaseUrl,
        ANTHROPIC_BASE_URL: i.anthropicBaseUrl,
        EDGE_ADMIN_TOKEN: i.adminToken,
      };
  }
}

/** The port of a service's /healthz, /readyz and /metrics. */
function opsPort(name: ServiceName, ports: ServicePorts): number {
  return name === 'mock-upstream' ? ports.mock : ports[name];
}

async function readyz(host: string, port: number): Promise<boolean> {
  const at = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  const res = await fetch(`http://${at}:${port}/readyz`, {
    signal: AbortSignal.timeout(2_000),
  }).catch(() => undefined);
  await res?.body?.cancel();
  return res?.status === 200;
}

/** The spawn spec of one service, from its built `dist/main.js`. */
export function serviceSpec(name: ServiceName, inputs: ServiceInputs): ProcessSpec {
  const entry = resolve(REPO_ROOT, ENTRIES[name]);
  if (!existsSync(entry)) {
    throw new StartError(`${entry} is missing: build first (pnpm build, or run pnpm stack)`);
  }
  return {
    name,
    command: process.execPath,
    args: [entry],
    env: { ...inputs.baseEnv, ...serviceEnv(name, inputs) },
    // /readyz, not a log line: it answers whatever LOG_LEVEL says, and only once every
    // dependency does.
    ready: { probe: () => readyz(inputs.host, opsPort(name, inputs.ports)) },
    // The alerter waits up to a minute for the authority's config; the others start in seconds.
    readyTimeoutMs: 60_000,
    // The aggregator flushes its last batch on the way out (up to 30 s).
    stopTimeoutMs: name === 'aggregator' ? 35_000 : 20_000,
  };
}
