import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.js';
import { waitFor } from './wait-for.js';

interface NatsClusterNode {
  name: string;
  /** Client URL of this node. */
  url: string;
  clusterPort: number;
  monitorPort: number;
  /** Its JetStream store. */
  dir: string;
  running(): boolean;
}

export interface NatsCluster {
  /** Every node's client URL, comma-separated: what NATS_URL gets. */
  url: string;
  nodes: NatsClusterNode[];
  /** kill -9 of one node: no shutdown, no goodbye to its routes. */
  kill(index: number): Promise<void>;
  /** Starts a stopped node again on its ports and store; resolves once it is healthy. */
  restart(index: number): Promise<void>;
  /** Resolves when every running node reports JetStream healthy (a meta leader, streams current). */
  waitHealthy(timeoutMs?: number): Promise<void>;
  /** Ends every node and removes the stores. */
  stop(): Promise<void>;
}

export interface NatsClusterOptions {
  nodes?: number;
  /** Where the stores go; a temp dir (removed by stop) when unset. */
  dir?: string;
  name?: string;
  /** Where each node's stderr goes (a file per node in the stack; ignored in tests). */
  log?: (node: string) => 'ignore' | number;
}

/**
 * A JetStream cluster of nats-server processes on 127.0.0.1, free ports, one store per node,
 * every node routing to the others. Resolves when a meta leader is elected and every node is
 * healthy, so an R3 stream can be created at once.
 */
export async function startNatsCluster(
  bin: string,
  opts: NatsClusterOptions = {},
): Promise<NatsCluster> {
  const count = opts.nodes ?? 3;
  const ownDir = opts.dir === undefined;
  const base = opts.dir ?? (await mkdtemp(join(tmpdir(), 'holdfast-nats-cluster-')));
  const clusterName = opts.name ?? 'holdfast';
  const nodes: NatsClusterNode[] = [];
  const children: (ChildProcess | undefined)[] = [];
  for (let i = 0; i < count; i++) {
    const name = `${clusterName}-n${i + 1}`;
    const dir = join(base, name);
    await mkdir(dir, { recursive: true });
    const [port, clusterPort, monitorPort] = [await freePort(), await freePort(), await freePort()];
    nodes.push({
      name,
      url: `nats://127.0.0.1:${port}`,
      clusterPort,
      monitorPort,
      dir,
      running: () => isRunning(children[i]),
    });
  }
  const args = (i: number) =>
    natsNodeArgs({
      host: '127.0.0.1',
      ...nodes[i]!,
      port: Number(new URL(nodes[i]!.url).port),
      clusterName,
      routes: nodes.filter((_, j) => j !== i).map((o) => o.clusterPort),
    });
  const launch = (i: number) => {
    const out = opts.log?.(nodes[i]!.name) ?? 'ignore';
    children[i] = spawn(bin, args(i), { cwd: nodes[i]!.dir, stdio: ['ignore', out, out] });
  };
  const waitHealthy = async (timeoutMs = 30_000) => {
    for (const [i, n] of nodes.entries()) {
      if (!isRunning(children[i])) continue;
      await waitFor(() => natsNodeHealthy(n.monitorPort), {
        timeoutMs,
        what: `JetStream healthy on ${n.name}`,
      });
    }
  };
  const kill = async (i: number) => {
    const c = children[i];
    children[i] = undefined;
    if (!isRunning(c)) return;
    const exited = new Promise((r) => c!.once('exit', r));
    c!.kill('SIGKILL');
    await exited;
  };

  for (let i = 0; i < count; i++) launch(i);
  await waitHealthy(60_000);
  return {
    url: nodes.map((n) => n.url).join(','),
    nodes,
    kill,
    restart: async (i) => {
      if (isRunning(children[i])) return;
      launch(i);
      await waitHealthy();
    },
    waitHealthy,
    stop: async () => {
      await Promise.all(nodes.map((_, i) => stopNode(children[i])));
      if (ownDir) await rm(base, { recursive: true, force: true });
    },
  };
}

/** One node of a JetStream cluster: its ports and store, and the route ports of the others. */
export interface NatsNodeSpec {
  host: string;
  name: string;
  port: number;
  clusterPort: number;
  monitorPort: number;
  dir: string;
  clusterName: string;
  routes: number[];
}

/** nats-server's arguments for one node (also what `pnpm stack --cluster` runs). */
export function natsNodeArgs(n: NatsNodeSpec): string[] {
  const routes = n.routes.map((p) => `nats://${n.host}:${p}`).join(',');
  return [
    ...['-a', n.host, '-p', String(n.port), '-m', String(n.monitorPort)],
    ...['-js', '-sd', n.dir, '-n', n.name],
    ...['--cluster_name', n.clusterName, '--cluster', `nats://${n.host}:${n.clusterPort}`],
    ...['--routes', routes],
  ];
}

/**
 * nats-server's /healthz: 200 once JetStream is enabled, the meta group has a leader, and this
 * node's streams and consumers have caught up.
 */
export async function natsNodeHealthy(monitorPort: number, host = '127.0.0.1'): Promise<boolean> {
  try {
    const res = await fetch(`http://${host}:${monitorPort}/healthz`, {
      signal: AbortSignal.timeout(2_000),
    });
    return res.ok;
  } catch {
    return false;
  }
}

function isRunning(c: ChildProcess | undefined): boolean {
  return c !== undefined && c.exitCode === null && c.signalCode === null;
}

async function stopNode(c: ChildProcess | undefined): Promise<void> {
  if (!isRunning(c)) return;
  const exited = new Promise((r) => c!.once('exit', r));
  c!.kill('SIGTERM');
  const timer = setTimeout(() => c!.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}
