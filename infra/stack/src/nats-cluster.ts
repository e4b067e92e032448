import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { natsNodeArgs, natsNodeHealthy, waitFor } from '@holdfast/testkit/infra';
import { requireBinary, tcpAnswers, type InfraContext, type StartedServer } from './infra.js';
import { StartError } from './process.js';
import { usualOrFreePort } from './ports.js';

/** The names of the cluster's processes (their log prefixes), in start order. */
export const NATS_CLUSTER_PROCESSES = ['nats-1', 'nats-2', 'nats-3'] as const;

/** What the services get on a cluster: every stream and bucket they create has three copies. */
export const CLUSTER_STREAM_REPLICAS = '3';

/**
 * `pnpm stack --cluster`: three nats-server processes with JetStream, routed to each other
 * (cluster `holdfast`), each with its store in `<dir>/nats-cluster/<node>`, clients on 4222-4224
 * (or free ports), routes on 6222-6224, monitoring on 8222-8224. Resolves once a JetStream meta
 * leader is elected and every node is healthy, so the services can create R3 streams at once.
 */
export async function startNatsCluster(ctx: InfraContext): Promise<StartedServer> {
  const bin = requireBinary(['nats-server'], 'apt-get install -y nats-server', 'NATS_URL');
  const nodes = [];
  const moved: string[] = [];
  for (const [i, name] of NATS_CLUSTER_PROCESSES.entries()) {
    const dir = join(ctx.dir, 'nats-cluster', name);
    await mkdir(dir, { recursive: true });
    const [port, clusterPort, monitorPort] = await Promise.all(
      [4222, 6222, 8222].map((usual) => usualOrFreePort(usual + i, ctx.freePorts)),
    );
    for (const p of [port, clusterPort, monitorPort]) if (p!.note) moved.push(p!.note);
    nodes.push({
      name,
      dir,
      port: port!.port,
      clusterPort: clusterPort!.port,
      monitorPort: monitorPort!.port,
    });
  }
  const procs = [];
  for (const n of nodes) {
    const args = natsNodeArgs({
      ...n,
      host: ctx.host,
      clusterName: 'holdfast',
      routes: nodes.filter((o) => o !== n).map((o) => o.clusterPort),
    });
    procs.push(
      await ctx.group.start({
        name: n.name,
        command: bin,
        args,
        ready: { probe: () => tcpAnswers(ctx.host, n.port) },
        readyTimeoutMs: 15_000,
        stopSignal: 'SIGINT',
        stopTimeoutMs: 10_000,
      }),
    );
  }
  // A node is healthy once the meta group has a leader, which takes a quorum: wait for all.
  for (const n of nodes) {
    await waitFor(() => natsNodeHealthy(n.monitorPort, ctx.host), {
      timeoutMs: 30_000,
      what: `JetStream healthy on ${n.name}`,
    }).catch(() => {
      throw new StartError(`the NATS cluster has no JetStream leader: ${n.name} is not healthy`);
    });
  }
  const monitor = nodes.map((n) => n.monitorPort).join(', ');
  return {
    url: nodes.map((n) => `nats://${ctx.host}:${n.port}`).join(','),
    proc: procs[0]!,
    note: [`3-node JetStream cluster, streams at R3, monitoring on ${monitor}`, ...moved].join(
      '; ',
    ),
  };
}
