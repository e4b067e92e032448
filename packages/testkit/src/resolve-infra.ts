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
    install: 'apt-get install -y nats-server (or set NATS_URL)',
  },
  redis: {
    env: 'REDIS_URL',
    binaries: ['redis-server'],
    image: 'redis:7-alpine',
    containerPort: 6379,
    scheme: 'redis',
    start: startRedisServer,
    install: 'apt-get install -y redis-server (or set REDIS_URL)',
  },
  clickhouse: {
    env: 'CLICKHOUSE_URL',
    binaries: ['clickhouse-server', 'clickhouse'],
    image: 'clickhouse/clickhouse-server:latest',
    containerPort: 8123,
    scheme: 'http',
    start: startClickHouseServer,
    install: 'apt-get install -y clickhouse-server (or set CLICKHOUSE_URL)',
  },
};

type Started = { url: string; stop: () => Promise<void> };

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
      const bin = p.binaries.map(findBinary).find((b) => b !== undefined);
      if (bin) {
        const server = await p.start(bin);
        stops.push(() => server.stop());
        return [name, { url: server.url }] as const;
      }
      return [
        name,
        {
          missing: `${name}: ${p.env} is not set, no Docker engine answers, and ${p.binaries.join('/')} is not on PATH. Fix: ${p.install}`,
        },
      ] as const;
    }),
  );
  const urls = Object.fromEntries(entries) as InfraUrls;
  for (const n of ['nats', 'redis', 'clickhouse'] as const)
    urls[n] ??= { missing: `${n}: not requested` };
  return { urls, stop: async () => void (await Promise.all(stops.map((s) => s()))) };
}

/** The URL of one piece of infra, or an error naming what is missing. */
export function requireUrl(urls: InfraUrls, name: InfraName): string {
  const entry = urls[name];
  if ('missing' in entry) throw new Error(entry.missing);
  return entry.url;
}
