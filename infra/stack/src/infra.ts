import { mkdir, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { findBinary } from '@holdfast/testkit/infra';
import { CLICKHOUSE_USERS_XML, clickhouseServerConfig } from './clickhouse-config.js';
import { StartError, type ManagedProcess, type ProcessGroup } from './process.js';
import { usualOrFreePort } from './ports.js';

/** A server the stack started: its URL, its process, and a note (e.g. the port it moved to). */
export interface StartedServer {
  url: string;
  proc: ManagedProcess;
  note: string | undefined;
}

export interface InfraContext {
  /** The stack's data dir; each server gets a folder in it. */
  dir: string;
  host: string;
  group: ProcessGroup;
  /** nats-server's monitoring port (`-m`), when one is wanted. */
  natsMonitorPort?: number | undefined;
  /** true: free ports for every server, never the usual ones (a bench beside a dev stack). */
  freePorts?: boolean;
}

export function requireBinary(names: string[], install: string, env: string): string {
  const bin = names.map(findBinary).find((b) => b !== undefined);
  if (bin) return bin;
  throw new StartError(
    `${names.join(' or ')} is not on PATH and ${env} is not set. Install it (${install}) or set ${env} to a running server.`,
  );
}

export function tcpAnswers(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host, port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** nats-server with JetStream, its store in `<dir>/nats`, on 4222 when that is free. */
export async function startNats(ctx: InfraContext): Promise<StartedServer> {
  const bin = requireBinary(['nats-server'], 'apt-get install -y nats-server', 'NATS_URL');
  const store = join(ctx.dir, 'nats');
  await mkdir(store, { recursive: true });
  const { port, note } = await usualOrFreePort(4222, ctx.freePorts);
  const proc = await ctx.group.start({
    name: 'nats',
    command: bin,
    args: [
      ...['-a', ctx.host, '-p', String(port), '-js', '-sd', store],
      ...(ctx.natsMonitorPort === undefined ? [] : ['-m', String(ctx.natsMonitorPort)]),
    ],
    ready: { probe: () => tcpAnswers(ctx.host, port) },
    readyTimeoutMs: 15_000,
    stopSignal: 'SIGINT',
    stopTimeoutMs: 10_000,
  });
  return { url: `nats://${ctx.host}:${port}`, proc, note };
}

/** redis-server with an append-only file in `<dir>/redis`, on 6379 when that is free. */
export async function startRedis(ctx: InfraContext): Promise<StartedServer> {
  const bin = requireBinary(['redis-server'], 'apt-get install -y redis-server', 'REDIS_URL');
  const data = join(ctx.dir, 'redis');
  await mkdir(data, { recursive: true });
  const { port, note } = await usualOrFreePort(6379, ctx.freePorts);
  const proc = await ctx.group.start({
    name: 'redis',
    command: bin,
    args: [
      '--port',
      String(port),
      '--bind',
      ctx.host,
      '--dir',
      data,
      '--appendonly',
      'yes',
      '--save',
      '',
      '--loglevel',
      'warning',
    ],
    ready: { probe: () => tcpAnswers(ctx.host, port) },
    readyTimeoutMs: 15_000,
    stopTimeoutMs: 10_000,
  });
  return { url: `redis://${ctx.host}:${port}`, proc, note };
}

/** clickhouse-server with its data and logs in `<dir>/clickhouse`, HTTP on 8123 when free. */
export async function startClickHouse(ctx: InfraContext): Promise<StartedServer> {
  const bin = requireBinary(
    ['clickhouse-server', 'clickhouse'],
    'apt-get install -y clickhouse-server',
    'CLICKHOUSE_URL',
  );
  const dir = join(ctx.dir, 'clickhouse');
  await mkdir(join(dir, 'log'), { recursive: true });
  const http = await usualOrFreePort(8123, ctx.freePorts);
  const tcp = await usualOrFreePort(9000, ctx.freePorts);
  const configFile = join(dir, 'config.xml');
  await writeFile(
    configFile,
    clickhouseServerConfig({ dir, host: ctx.host, httpPort: http.port, tcpPort: tcp.port }),
  );
  await writeFile(join(dir, 'users.xml'), CLICKHOUSE_USERS_XML);
  const url = `http://${ctx.host}:${http.port}`;
  const proc = await ctx.group.start({
    name: 'clickhouse',
    command: bin,
    // The single `clickhouse` binary of newer releases takes the `server` subcommand.
    args: [...(bin.endsWith('/clickhouse') ? ['server'] : []), `--config-file=${configFile}`],
    cwd: dir,
    ready: { probe: async () => (await fetch(`${url}/ping`).catch(() => undefined))?.ok === true },
    readyTimeoutMs: 60_000,
    stopTimeoutMs: 20_000,
  });
  return { url, proc, note: http.note && `HTTP port ${http.note} (logs in ${dir}/log)` };
}
