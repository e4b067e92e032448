import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './ports.js';
import { waitFor } from './wait-for.js';

/** How a Redis node keeps its writes: `always` fsyncs each one before it answers. */
export type AppendFsync = 'always' | 'everysec' | 'no';

/** One node of a Redis Cluster: where it listens and where its files are. */
export interface RedisClusterNodeSpec {
  host: string;
  port: number;
  busPort: number;
  dir: string;
}

/**
 * redis-server's arguments for a cluster node. `cluster-require-full-coverage no`: a master
 * that is down fails only its own slots (its orgs), not the whole cluster. Replica validity 0:
 * a replica is promoted however long it was cut off, so a failover always happens.
 */
export function redisClusterNodeArgs(
  n: RedisClusterNodeSpec,
  o: { nodeTimeoutMs: number; appendfsync: AppendFsync },
): string[] {
  return [
    ...['--port', String(n.port), '--bind', n.host, '--dir', n.dir],
    ...['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf'],
    ...['--cluster-port', String(n.busPort)],
    ...['--cluster-node-timeout', String(o.nodeTimeoutMs)],
    ...['--cluster-require-full-coverage', 'no', '--cluster-replica-validity-factor', '0'],
    ...['--appendonly', 'yes', '--appendfsync', o.appendfsync, '--save', ''],
    ...['--loglevel', 'warning'],
  ];
}

/** redis-cli next to redis-server, else on PATH. */
export function redisCli(serverBin: string): string {
  const beside = join(dirname(serverBin), 'redis-cli');
  const probe = spawnSync(beside, ['--version']);
  return probe.status === 0 ? beside : 'redis-cli';
}

/** `redis-cli --cluster create` over fresh nodes (the first `masters` become masters). */
export function createRedisCluster(
  cli: string,
  nodes: RedisClusterNodeSpec[],
  replicasPerMaster: number,
): void {
  const r = spawnSync(
    cli,
    [
      '--cluster',
      'create',
      ...nodes.map((n) => `${n.host}:${n.port}`),
      '--cluster-replicas',
      String(replicasPerMaster),
      '--cluster-yes',
    ],
    { encoding: 'utf8', timeout: 60_000 },
  );
  if (r.status !== 0) throw new Error(`redis-cli --cluster create failed: ${r.stdout}${r.stderr}`);
}

async function ask<T>(host: string, port: number, f: (r: Redis) => Promise<T>): Promise<T> {
  const r = new Redis({
    host,
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  r.on('error', () => undefined);
  try {
    await r.connect();
    return await f(r);
  } finally {
    r.disconnect();
  }
}

/**
 * True when every given node says cluster_state:ok, sees every slot served, and, if it is a
 * replica, has its master's data (a fresh replica syncs for a few seconds; WAIT counts it only
 * then).
 */
export async function redisClusterOk(nodes: { host: string; port: number }[]): Promise<boolean> {
  const infos = await Promise.all(
    nodes.map((n) =>
      ask(
        n.host,
        n.port,
        async (r) => `${String(await r.cluster('INFO'))}${await r.info('replication')}`,
      ).catch(() => ''),
    ),
  );
  return infos.every(
    (i) =>
      i.includes('cluster_state:ok') &&
      i.includes('cluster_slots_ok:16384') &&
      (i.includes('role:master') || i.includes('master_link_status:up')),
  );
}

/** Which node serves which slot range (CLUSTER SLOTS as seen by `via`). */
async function redisClusterSlots(via: {
  host: string;
  port: number;
}): Promise<{ from: number; to: number; master: number; replicas: number[] }[]> {
  const rows = await ask(via.host, via.port, (r) => r.cluster('SLOTS'));
  return rows.map(([from, to, ...served]) => ({
    from,
    to,
    master: served[0]?.[1] ?? 0,
    replicas: served.slice(1).map((x) => x[1]),
  }));
}

interface LocalRedisClusterNode extends RedisClusterNodeSpec {
  url: string;
  /** The process, while it runs. */
  child: ChildProcess | undefined;
}

export interface LocalRedisCluster {
  /** Every node's URL, comma-separated: what REDIS_URL takes. */
  url: string;
  nodes: LocalRedisClusterNode[];
  /** The port of the master serving `slot` now. */
  masterOf(slot: number): Promise<number>;
  /** The ports of the masters now. */
  masters(): Promise<number[]>;
  /** kill -9 of the node on `port`: no shutdown, no last fsync. */
  kill(port: number): void;
  /** SIGSTOP / SIGCONT of the node on `port`: a replica that falls behind, as if cut off. */
  pause(port: number): void;
  resume(port: number): void;
  /**
   * A replica of the master on `port`, waited for: under load a replica is left out of
   * CLUSTER SLOTS for a moment whenever the small node timeout marks it failing.
   */
  aReplicaOf(port: number, timeoutMs?: number): Promise<number>;
  /** Starts the node on `port` again from its files (nodes.conf, AOF); it rejoins. */
  restart(port: number): Promise<void>;
  /** Resolves once every running node says cluster_state:ok. */
  waitOk(timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A Redis Cluster of local redis-server processes on free ports in a temp dir, for the
 * cluster and failover tests: `masters` masters with `replicasPerMaster` replicas each, every
 * node with an AOF (`appendfsync` always unless told). A small node timeout makes a killed
 * master's replica take over within a few seconds.
 */
export async function startRedisCluster(
  bin: string,
  opts: {
    masters?: number;
    replicasPerMaster?: number;
    nodeTimeoutMs?: number;
    appendfsync?: AppendFsync;
  } = {},
): Promise<LocalRedisCluster> {
  const masters = opts.masters ?? 3;
  const replicas = opts.replicasPerMaster ?? 1;
  const o = {
    nodeTimeoutMs: opts.nodeTimeoutMs ?? 1_000,
    appendfsync: opts.appendfsync ?? 'always',
  };
  const root = await mkdtemp(join(tmpdir(), 'holdfast-redis-cluster-'));
  const nodes: LocalRedisClusterNode[] = [];
  for (let i = 0; i < masters * (1 + replicas); i++) {
    const [port, busPort] = [await freePort(), await freePort()];
    const dir = join(root, String(port));
    await mkdir(dir);
    nodes.push({
      host: '127.0.0.1',
      port,
      busPort,
      dir,
      url: `redis://127.0.0.1:${port}`,
      child: undefined,
    });
  }
  const launch = async (n: LocalRedisClusterNode) => {
    const child = spawn(bin, redisClusterNodeArgs(n, o), { cwd: n.dir, stdio: 'ignore' });
    n.child = child;
    child.once('exit', () => {
      if (n.child === child) n.child = undefined;
    });
    await waitFor(() => ask(n.host, n.port, (r) => r.ping()), {
      timeoutMs: 15_000,
      what: `redis cluster node on ${n.port}`,
    });
  };
  const node = (port: number) => {
    const n = nodes.find((x) => x.port === port);
    if (!n) throw new Error(`no cluster node on ${port}`);
    return n;
  };
  const live = () => nodes.filter((n) => n.child);
  const waitOk = async (timeoutMs = 30_000) => {
    await waitFor(() => redisClusterOk(live()), {
      timeoutMs,
      what: 'cluster_state:ok on every node',
    });
  };
  const slots = () => redisClusterSlots(live()[0]!);
  try {
    await Promise.all(nodes.map(launch));
    createRedisCluster(redisCli(bin), nodes, replicas);
    await waitOk();
  } catch (err) {
    for (const n of nodes) n.child?.kill('SIGKILL');
    await rm(root, { recursive: true, force: true });
    throw err;
  }
  return {
    url: nodes.map((n) => n.url).join(','),
    nodes,
    masterOf: async (slot) => {
      const row = (await slots()).find((s) => slot >= s.from && slot <= s.to);
      if (!row) throw new Error(`slot ${slot} is not served`);
      return row.master;
    },
    masters: async () => [...new Set((await slots()).map((s) => s.master))],
    kill: (port) => {
      const n = node(port);
      n.child?.kill('SIGKILL');
      n.child = undefined;
    },
    pause: (port) => node(port).child?.kill('SIGSTOP'),
    resume: (port) => node(port).child?.kill('SIGCONT'),
    aReplicaOf: async (port, timeoutMs = 20_000) => {
      let found: number | undefined;
      await waitFor(
        async () => {
          const bySlots = (await slots()).filter((s) => s.master === port);
          found = bySlots.flatMap((s) => s.replicas)[0];
          return found !== undefined;
        },
        { timeoutMs, what: `a replica of the master on ${port}` },
      );
      return found!;
    },
    restart: (port) => launch(node(port)),
    waitOk,
    stop: async () => {
      await Promise.all(
        nodes.map(async (n) => {
          const c = n.child;
          if (!c) return;
          const exited = new Promise((r) => c.once('exit', r));
          c.kill('SIGKILL');
          await exited;
        }),
      );
      await rm(root, { recursive: true, force: true });
    },
  };
}

export interface KillableRedis {
  url: string;
  dir: string;
  /** kill -9: no shutdown, no last fsync. */
  kill(): void;
  /** Starts it again on the same port from its files (the AOF). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** One redis-server with an AOF on a free port in a temp dir, to kill -9 and restart. */
export async function startKillableRedis(
  bin: string,
  opts: { appendfsync?: AppendFsync } = {},
): Promise<KillableRedis> {
  const dir = await mkdtemp(join(tmpdir(), 'holdfast-redis-aof-'));
  const port = await freePort();
  const args = [
    ...['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', ''],
    ...['--appendonly', 'yes', '--appendfsync', opts.appendfsync ?? 'always'],
  ];
  let child: ChildProcess | undefined;
  const launch = async () => {
    child = spawn(bin, args, { cwd: dir, stdio: 'ignore' });
    // A restarted Redis answers LOADING until the AOF is read: wait for a real PING.
    await waitFor(() => ask('127.0.0.1', port, (r) => r.ping()), {
      timeoutMs: 15_000,
      what: `redis-server on ${port}`,
    });
  };
  const kill = () => {
    child?.kill('SIGKILL');
    child = undefined;
  };
  await launch();
  return {
    url: `redis://127.0.0.1:${port}`,
    dir,
    kill,
    restart: launch,
    stop: async () => {
      const c = child;
      if (c && c.exitCode === null) {
        const exited = new Promise((r) => c.once('exit', r));
        kill();
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
