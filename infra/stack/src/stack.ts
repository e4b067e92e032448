import { mkdir } from 'node:fs/promises';
import { loadConfigFile, natsNames, natsNamesEnv, natsNamesToEnv } from '@holdfast/config';
import { z } from 'zod';
import { stackAdminToken, type AdminToken } from './admin-token.js';
import { demoKeys, type DemoKey } from './demo-keys.js';
import type { StackSettings } from './env.js';
import { startClickHouse, startNats, startRedis, type InfraContext } from './infra.js';
import { CLUSTER_STREAM_REPLICAS, startNatsCluster } from './nats-cluster.js';
import { StartError, type ProcessGroup } from './process.js';
import { portIsFree } from './ports.js';
import { reservePorts } from '@holdfast/testkit/infra';
import { startRedisCluster } from './redis-cluster.js';
import { serviceSpec, type ServiceInputs, type ServicePorts } from './services.js';
import { isAlive, readStackStateFile, writeStackState, type StackState } from './state.js';
import { chooseUpstream, type UpstreamChoice } from './upstream.js';

/** A piece of infra: the URL given, or a server the stack started (with a note). */
export interface InfraEntry {
  url: string;
  started: boolean;
  note: string | undefined;
}

export interface RunningStack {
  state: StackState;
  infra: Record<'nats' | 'redis' | 'clickhouse', InfraEntry>;
  upstream: UpstreamChoice;
  /** The example config's `claude` upstream (Anthropic's API). */
  anthropic: UpstreamChoice;
  demoKeys: DemoKey[];
  admin: AdminToken;
}

/** Every process the stack starts (when no infra URL is given), in start order. */
export const PROCESS_ORDER = [
  'nats',
  'redis',
  'clickhouse',
  'mock-upstream',
  'authority',
  'aggregator',
  'alerter',
  'edge',
] as const;

const PORT_VARS: Record<keyof ServicePorts, string> = {
  edge: 'EDGE_PORT',
  mock: 'MOCK_UPSTREAM_PORT',
  authority: 'AUTHORITY_OPS_PORT',
  aggregator: 'BILLING_AGGREGATOR_OPS_PORT',
  alerter: 'ALERTER_OPS_PORT',
};

/**
 * Starts the stack into `group`, one process after the other so that stopping the group in
 * reverse is the right order: the infra that has no URL (NATS, Redis, ClickHouse), the mock
 * upstream, the authority, the aggregator, the alerter, the edge. Throws when a port is taken,
 * a binary is missing, the config is invalid or a process is not ready; the caller then stops
 * the group, which stops what did start.
 */
export async function startStack(
  settings: StackSettings,
  group: ProcessGroup,
): Promise<RunningStack> {
  const { env, dir } = settings;
  const previous = readStackStateFile(dir);
  if (previous && isAlive(previous.pid)) {
    throw new StartError(
      `a stack already runs from ${dir} (runner pid ${previous.pid}): stop it, or set HOLDFAST_STACK_DIR`,
    );
  }
  // A runner that was killed (kill -9) could not stop its children: say which are left.
  const left = previous?.processes.filter((p) => isAlive(p.pid)) ?? [];
  if (left.length > 0) {
    throw new StartError(
      `the last stack from ${dir} was killed and left ${left.map((p) => `${p.name} (pid ${p.pid})`).join(', ')} running: stop them (kill ${left.map((p) => p.pid).join(' ')}) and start again`,
    );
  }
  const config = await loadConfigFile(settings.configPath);
  const ports: ServicePorts = {
    edge: env.EDGE_PORT,
    mock: env.MOCK_UPSTREAM_PORT,
    authority: env.AUTHORITY_OPS_PORT,
    aggregator: env.BILLING_AGGREGATOR_OPS_PORT,
    alerter: env.ALERTER_OPS_PORT,
  };
  for (const [name, port] of Object.entries(ports) as Array<[keyof ServicePorts, number]>) {
    if (!(await portIsFree(port))) {
      throw new StartError(`port ${port} (${name}) is in use: free it or set ${PORT_VARS[name]}`);
    }
  }
  // The servers the stack starts on free ports must not be given one of these.
  reservePorts(Object.values(ports));
  await mkdir(dir, { recursive: true });
  const admin = await stackAdminToken(dir, env.EDGE_ADMIN_TOKEN);

  const host = env.HOLDFAST_STACK_HOST;
  const ctx: InfraContext = {
    dir,
    host,
    group,
    natsMonitorPort: env.HOLDFAST_NATS_MONITOR_PORT,
    freePorts: env.HOLDFAST_STACK_FREE_PORTS,
  };
  const infra = async (given: string | undefined, start: typeof startNats) => {
    if (given) return { url: given, started: false, note: undefined };
    const server = await start(ctx);
    return { url: server.url, started: true, note: server.note };
  };
  const nats = await infra(env.NATS_URL, settings.cluster ? startNatsCluster : startNats);
  const redis = await infra(env.REDIS_URL, settings.cluster ? startRedisCluster : startRedis);
  const redisCluster = settings.cluster || redis.url.includes(',');
  const clickhouse = await infra(env.CLICKHOUSE_URL, startClickHouse);

  const mockUrl = `http://${host}:${ports.mock}`;
  const upstream = chooseUpstream(env, `${mockUrl}/v1`);
  const anthropic = chooseUpstream(env, mockUrl, 'anthropic');
  const inputs: ServiceInputs = {
    urls: { nats: nats.url, redis: redis.url, clickhouse: clickhouse.url },
    redisCluster,
    ports,
    host,
    configPath: settings.configPath,
    upstreamBaseUrl: upstream.baseUrl,
    anthropicBaseUrl: anthropic.baseUrl,
    adminToken: admin.token,
    // On a cluster the streams the services create get three copies, unless the caller says.
    baseEnv: settings.cluster
      ? { HOLDFAST_STREAM_REPLICAS: CLUSTER_STREAM_REPLICAS, ...settings.childEnv }
      : settings.childEnv,
  };
  for (const name of ['mock-upstream', 'authority', 'aggregator', 'alerter', 'edge'] as const) {
    await group.start(serviceSpec(name, inputs));
  }

  const state: StackState = {
    pid: process.pid,
    startedAt: new Date().toISOString(),
    urls: {
      edge: `http://${host}:${ports.edge}`,
      mock: mockUrl,
      nats: nats.url,
      redis: redis.url,
      clickhouse: clickhouse.url,
      authorityOps: `http://${host}:${ports.authority}`,
      aggregatorOps: `http://${host}:${ports.aggregator}`,
      alerterOps: `http://${host}:${ports.alerter}`,
    },
    clickhouseDatabase: settings.childEnv.CLICKHOUSE_DATABASE ?? 'holdfast',
    natsNames: natsNamesToEnv(natsNames(z.object(natsNamesEnv).parse(settings.childEnv))),
    configPath: settings.configPath,
    processes: group.processes.map((p) => ({ name: p.name, pid: p.pid })),
  };
  await writeStackState(dir, state);
  return {
    state,
    infra: { nats, redis, clickhouse },
    upstream,
    anthropic,
    demoKeys: demoKeys(config),
    admin,
  };
}
