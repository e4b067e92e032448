import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './ports.js';
import { serverBinary } from './resolve-infra.js';
import { waitFor } from './wait-for.js';

export interface LocalServer {
  url: string;
  stop(): Promise<void>;
}

/** Absolute path of a binary on PATH (or the usual sbin dirs), or undefined. */
export function findBinary(name: string): string | undefined {
  const path = [process.env.PATH ?? '', '/usr/sbin', '/usr/local/sbin', '/sbin'].join(':');
  const found = spawnSync('sh', ['-c', `command -v ${name}`], {
    env: { ...process.env, PATH: path },
    encoding: 'utf8',
  });
  const out = found.stdout.trim();
  return found.status === 0 && out ? out : undefined;
}

/** Ends a process: SIGTERM, then SIGKILL after 5 s. */
async function endProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  }
}

async function stopChild(child: ChildProcess, dir: string): Promise<void> {
  await endProcess(child);
  await rm(dir, { recursive: true, force: true });
}

function launch(bin: string, args: string[], dir: string): ChildProcess {
  const child = spawn(bin, args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  child.stderr?.resume();
  return child;
}

/** A nats-server with JetStream; `config` is extra server configuration (`max_payload: 8192`). */
export async function startNatsServer(bin: string, config?: string): Promise<LocalServer> {
  const server = await startRestartableNatsServer(bin, config);
  return { url: server.url, stop: () => server.stop() };
}

/**
 * A nats-server with JetStream on a free port and a store in a temp dir, for outage tests:
 * `halt()` ends it (SIGTERM: JetStream writes its state), `restart()` brings it back on the
 * same port and store, as a restarted server looks to clients that hold its URL.
 */
export async function startRestartableNatsServer(
  bin: string,
  config?: string,
): Promise<RestartableServer> {
  const dir = await mkdtemp(join(tmpdir(), 'holdfast-nats-'));
  const port = await freePort();
  const args = ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir];
  if (config !== undefined) {
    await writeFile(join(dir, 'extra.conf'), config);
    args.push('-c', join(dir, 'extra.conf'));
  }
  let child: ChildProcess | undefined;
  const up = async () => {
    child = launch(bin, args, dir);
    await waitFor(() => canConnect(port), { timeoutMs: 15_000, what: `nats-server on ${port}` });
  };
  const halt = async () => {
    const c = child;
    child = undefined;
    if (c) await endProcess(c);
  };
  await up();
  return {
    url: `nats://127.0.0.1:${port}`,
    halt,
    restart: up,
    stop: async () => {
      await halt();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export async function startRedisServer(bin: string): Promise<LocalServer> {
  const dir = await mkdtemp(join(tmpdir(), 'holdfast-redis-'));
  const port = await freePort();
  const child = launch(
    bin,
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
    ],
    dir,
  );
  await waitFor(() => canConnect(port), { timeoutMs: 15_000, what: `redis-server on ${port}` });
  return { url: `redis://127.0.0.1:${port}`, stop: () => stopChild(child, dir) };
}

/** A redis-server of one test's own, with an admin connection (see startOwnRedis). */
export interface OwnRedis {
  url: string;
  admin: Redis;
  /** CLIENT PAUSE: every client's commands (or only writes) wait `ms`, then run in order. */
  pause(ms: number, what?: 'ALL' | 'WRITE'): Promise<unknown>;
  stop(): Promise<void>;
}

/**
 * A redis-server on a free port (nothing on disk) for one test, so pausing, flushing or
 * stopping it disturbs no other test.
 */
export async function startOwnRedis(): Promise<OwnRedis> {
  const server = await startRedisServer(serverBinary('redis'));
  const admin = new Redis(server.url, { maxRetriesPerRequest: 2 });
  admin.on('error', () => undefined);
  return {
    url: server.url,
    admin,
    pause: (ms, what = 'ALL') => admin.call('CLIENT', 'PAUSE', String(ms), what),
    stop: async () => {
      admin.disconnect();
      await server.stop();
    },
  };
}

/** Starts clickhouse-server with a config written for a temp dir (works for 18.16 and newer). */
export async function startClickHouseServer(bin: string): Promise<LocalServer> {
  const server = await startRestartableClickHouseServer(bin);
  return { url: server.url, stop: () => server.stop() };
}

/** A local server that can be stopped and started again on the same data dir and ports. */
export interface RestartableServer extends LocalServer {
  /** Stops the process (SIGTERM, then SIGKILL after 5 s), keeping its data and ports. */
  halt(): Promise<void>;
  /** Starts the process again on the same data dir and ports; resolves when it answers. */
  restart(): Promise<void>;
}

/** Launches of one start or restart before it gives up (a launch whose port is taken exits in ~1 s). */
const CLICKHOUSE_LAUNCHES = 10;
const CLICKHOUSE_RELAUNCH_PAUSE_MS = 1_000;

/**
 * clickhouse-server on free ports in a temp dir, for outage tests: `halt()` takes it away,
 * `restart()` brings it back with its data. `stop()` ends it and removes the dir.
 *
 * Its ports are picked free beforehand, not bound as 0: clickhouse-server logs no port it chose,
 * and a restart must come back on the same port, since the clients hold its URL through the
 * outage. A port can still be taken before clickhouse-server binds it (a connection of another
 * test under load, seen as EADDRINUSE in CI), so each start launches again when the process
 * exits without answering: the first start on new ports (no client has the URL yet), a restart
 * on the same ports after a pause, until the taker lets go.
 */
export async function startRestartableClickHouseServer(bin: string): Promise<RestartableServer> {
  const dir = await mkdtemp(join(tmpdir(), 'holdfast-clickhouse-'));
  await writeFile(join(dir, 'users.xml'), CLICKHOUSE_USERS);
  const args = bin.endsWith('/clickhouse')
    ? ['server', `--config-file=${join(dir, 'config.xml')}`]
    : [`--config-file=${join(dir, 'config.xml')}`];
  let httpPort = 0;
  const pickPorts = async () => {
    const tcpPort = await freePort();
    httpPort = await freePort();
    await writeFile(join(dir, 'config.xml'), clickhouseConfig(dir, httpPort, tcpPort));
  };
  let child: ChildProcess | undefined;
  /** One launch: true once it answers /ping, false if it exited first (a port was taken). */
  const launchOnce = async (): Promise<boolean> => {
    const c = launch(bin, args, dir);
    child = c;
    const state = await waitFor(
      async () => {
        if (c.exitCode !== null || c.signalCode !== null) return 'exited';
        // "Ok.\n" is clickhouse-server's own answer, not another server's on a taken port.
        const res = await fetch(`http://127.0.0.1:${httpPort}/ping`);
        return res.ok && (await res.text()) === 'Ok.\n' ? 'up' : undefined;
      },
      { timeoutMs: 30_000, what: `clickhouse-server on ${httpPort}` },
    );
    return state === 'up';
  };
  const start = async (newPorts: boolean) => {
    for (let launches = 1; ; launches++) {
      if (await launchOnce()) return;
      if (launches === CLICKHOUSE_LAUNCHES) {
        const log = await readFile(join(dir, 'error.log'), 'utf8').catch(() => '');
        throw new Error(
          `clickhouse-server exited ${launches} times before answering on ${httpPort}:\n${log.split('\n').slice(-5).join('\n')}`,
        );
      }
      if (newPorts) await pickPorts();
      else await new Promise((r) => setTimeout(r, CLICKHOUSE_RELAUNCH_PAUSE_MS));
    }
  };
  const halt = async () => {
    const c = child;
    child = undefined;
    if (c) await endProcess(c);
  };
  await pickPorts();
  await start(true);
  return {
    url: `http://127.0.0.1:${httpPort}`,
    halt,
    restart: () => start(false),
    stop: async () => {
      await halt();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function canConnect(port: number): Promise<boolean> {
  const { createConnection } = await import('node:net');
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}

/**
 * merge_tree: the parts a merge replaced are deleted a second after it (old_parts_lifetime, 480 s
 * by default, kept against a power loss the data dir of a test server need not survive),
 * checked every second (cleanup_delay_period, 30 s). Every insert is a part, and a DROP deletes
 * every file of the parts still kept, ~90 a part of the 40-column events_raw_v1: after 300
 * small inserts it kept 351 and its DROP took 18.4 s on a loaded box (0.5 s with these), past
 * the client's 30 s in CI's teardowns. A bench pays that deletion as it goes, as a server
 * running for longer than 8 minutes does.
 */
function clickhouseConfig(dir: string, httpPort: number, tcpPort: number): string {
  return `<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>${dir}/server.log</log><errorlog>${dir}/error.log</errorlog><size>10M</size><count>1</count></logger>
  <http_port>${httpPort}</http_port>
  <tcp_port>${tcpPort}</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <path>${dir}/data/</path>
  <tmp_path>${dir}/tmp/</tmp_path>
  <user_files_path>${dir}/data/user_files/</user_files_path>
  <format_schema_path>${dir}/data/format_schemas/</format_schema_path>
  <users_config>users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
  <max_concurrent_queries>200</max_concurrent_queries>
  <keep_alive_timeout>3</keep_alive_timeout>
  <merge_tree><old_parts_lifetime>1</old_parts_lifetime><cleanup_delay_period>1</cleanup_delay_period></merge_tree>
</yandex>
`;
}

const CLICKHOUSE_USERS = `<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>4000000000</max_memory_usage></default></profiles>
  <users><default><password></password><networks><ip>::/0</ip></networks><profile>default</profile><quota>default</quota></default></users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
`;
