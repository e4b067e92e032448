import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  createRedisCluster,
  freePort,
  redisCli,
  redisClusterNodeArgs,
  redisClusterOk,
  waitFor,
  type RedisClusterNodeSpec,
} from '@holdfast/testkit/infra';
import { requireBinary, tcpAnswers, type InfraContext, type StartedServer } from './infra.js';
import { portIsFree } from './ports.js';
import { StartError } from './process.js';

const MASTERS = 3;
const REPLICAS_PER_MASTER = 1;

/** The nodes' process names in the stack's output. */
export const REDIS_CLUSTER_PROCESSES = Array.from(
  { length: MASTERS * (1 + REPLICAS_PER_MASTER) },
  (_, i) => `redis-${i + 1}`,
);

/** The nodes' ports, kept beside their data: nodes.conf names them, so a restart reuses them. */
interface Layout {
  nodes: { port: number; busPort: number }[];
}

async function layout(root: string): Promise<{ layout: Layout; fresh: boolean }> {
  const file = join(root, 'ports.json');
  if (existsSync(file)) {
    const kept = JSON.parse(await readFile(file, 'utf8')) as Layout;
    for (const n of kept.nodes) {
      for (const port of [n.port, n.busPort]) {
        if (!(await portIsFree(port))) {
          throw new StartError(
            `the Redis Cluster in ${root} listens on port ${port}, which is in use: free it, or delete ${root} (its budgets with it) to start a new cluster`,
          );
        }
      }
    }
    return { layout: kept, fresh: false };
  }
  const nodes: Layout['nodes'] = [];
  for (let i = 0; i < MASTERS * (1 + REPLICAS_PER_MASTER); i++) {
    nodes.push({ port: await freePort(), busPort: await freePort() });
  }
  return { layout: { nodes }, fresh: true };
}

/**
 * `pnpm stack --cluster`: a local Redis Cluster of 3 masters with one replica each, every
 * node a Debian redis-server on free ports with its data (AOF, nodes.conf) in
 * `<dir>/redis-cluster/<port>`. Created with `redis-cli --cluster create` the first time;
 * later starts reuse the same ports and files, and the nodes find each other again.
 */
export async function startRedisCluster(ctx: InfraContext): Promise<StartedServer> {
  const bin = requireBinary(['redis-server'], 'apt-get install -y redis-server', 'REDIS_URL');
  const root = join(ctx.dir, 'redis-cluster');
  await mkdir(root, { recursive: true });
  const { layout: l, fresh } = await layout(root);
  const specs: RedisClusterNodeSpec[] = l.nodes.map((n) => ({
    host: ctx.host,
    port: n.port,
    busPort: n.busPort,
    dir: join(root, String(n.port)),
  }));
  let first: StartedServer['proc'] | undefined;
  for (const [i, spec] of specs.entries()) {
    await mkdir(spec.dir, { recursive: true });
    const proc = await ctx.group.start({
      name: REDIS_CLUSTER_PROCESSES[i]!,
      command: bin,
      // Each write fsynced before it is answered, as for the single Redis.
      args: redisClusterNodeArgs(spec, { nodeTimeoutMs: 5_000, appendfsync: 'always' }),
      cwd: spec.dir,
      ready: { probe: () => tcpAnswers(ctx.host, spec.port) },
      readyTimeoutMs: 15_000,
      stopTimeoutMs: 10_000,
    });
    first ??= proc;
  }
  if (fresh) {
    createRedisCluster(redisCli(bin), specs, REPLICAS_PER_MASTER);
    await writeFile(join(root, 'ports.json'), JSON.stringify(l, null, 2));
  }
  await waitFor(() => redisClusterOk(specs), {
    timeoutMs: 60_000,
    what: 'the Redis Cluster (cluster_state:ok, replicas in sync)',
  });
  const ports = specs.map((s) => s.port);
  return {
    url: specs.map((s) => `redis://${s.host}:${s.port}`).join(','),
    proc: first!,
    note: `Redis Cluster: masters first on ${ports.slice(0, MASTERS).join(', ')}, replicas on ${ports.slice(MASTERS).join(', ')} (roles move on failover); the authority waits for 1 replica per write`,
  };
}
