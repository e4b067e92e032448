import {
  findBinary,
  startClickHouseServer,
  startNatsServer,
  startRedisServer,
  type LocalServer,
} from './local-servers.js';

export type InfraName = 'nats' | 'redis' | 'clickhouse';

/** Where each piece of infra is, or why it is missing. */
export type InfraUrls = Record<InfraName, { url: string } | { missing: string }>;

interface Provider {
  env: string;
  binaries: string[];
  image: string;
  containerPort: number;
  command?: string[];
  scheme: string;
  start: (bin: string) => Promise<LocalServer>;
  install: string;
}

const PROVIDERS: Record<InfraName, Provider> = {
  nats: {
    env: 'NATS_URL',
    binaries: ['nats-server'],
    image: 'nats:2.10-alpine',
    containerPort: 4222,
    command: ['-js'],
    scheme: 'nats',
    start: startNatsServer,
    install: 'apt-get install -y nats-server',
  },
  redis: {
    env: 'REDIS_URL',
    binaries: ['redis-server'],
    image: 'redis:7-alpine',
    containerPort: 6379,
    scheme: 'redis',
    start: startRedisServer,
    install: 'apt-get install -y redis-server',
  },
  clickhouse: {
    env: 'CLICKHOUSE_URL',
    binaries: ['clickhouse-server', 'clickhouse'],
    image: 'clickhouse/clickhouse-server:latest',
    containerPort: 8123,
    scheme: 'http',
    start: startClickHouseServer,
    install: 'apt-get install -y clickhouse-server',
  },
};

type Started = { url: string; stop: () => Promise<void> };

/** The first of a provider's server binaries on PATH. */
const findServer = (p: Provider) => p.binaries.map(findBinary).find((b) => b !== undefined);

async function tryContainer(p: Provider): Promise<Started | undefined> {
  if (process.env.HOLDFAST_TESTCONTAINERS === 'off') return undefined;
  try {
    const tc = await import('testcontainers');
    await tc.getContainerRuntimeClient();
    let container = new tc.GenericContainer(p.image).withExposedPorts(p.containerPort);
    if (p.command) container = container.withCommand(p.command);
    const started = await container.start();
    const url = `${p.scheme}://${started.getHost()}:${started.getMappedPort(p.containerPort)}`;
    return { url, stop: async () => void (await started.stop()) };
  } catch (err) {
    if (/container runtime strategy/i.test((err as Error).message)) return undefined;
    throw err;
  }
}

/**
 * Resolves each piece of infra: `*_URL` when set; else Testcontainers when a Docker engine
 * answers; else the server binary from PATH on a free port in a temp dir; else a message that
 * names what is missing and how to get it.
 */
export async function resolveInfra(
  names: InfraName[] = ['nats', 'redis', 'clickhouse'],
): Promise<{ urls: InfraUrls; stop: () => Promise<void> }> {
  const stops: Array<() => Promise<void>> = [];
  const entries = await Promise.all(
    names.map(async (name) => {
      const p = PROVIDERS[name];
      const fromEnv = process.env[p.env];
      if (fromEnv) return [name, { url: fromEnv }] as const;
      const container = await tryContainer(p);
      if (container) {
        stops.push(container.stop);
        return [name, { url: container.url }] as const;
      }
      const bin = findServer(p);
      if (bin) {
        const server = await p.start(bin);
        stops.push(() => server.stop());
        return [name, { url: server.url }] as const;
      }
      return [
        name,
        {
          missing: `${name}: ${p.env} is not set, no Docker engine answers, and ${p.binaries.join('/')} is not on PATH. Fix: ${p.install} (or set ${p.env})`,
        },
      ] as const;
    }),
  );
  const urls = Object.fromEntries(entries) as InfraUrls;
  for (const n of ['nats', 'redis', 'clickhouse'] as const)
    urls[n] ??= { missing: `${n}: not requested` };
  return { urls, stop: async () => void (await Promise.all(stops.map((s) => s()))) };
}

/**
 * The server binary of one piece of infra, for a test or bench that starts servers of its own
 * (a cluster, one it kills or restarts): the first of its names on PATH, else an error that
 * says how to install it.
 */
export function serverBinary(name: InfraName): string {
  const p = PROVIDERS[name];
  const bin = findServer(p);
  if (!bin) throw new Error(`${p.binaries.join('/')} is not on PATH: ${p.install}`);
  return bin;
}

/** The URL of one piece of infra, or an error naming what is missing. */
export function requireUrl(urls: InfraUrls, name: InfraName): string {
  const entry = urls[name];
  if ('missing' in entry) throw new Error(entry.missing);
  return entry.url;
}
