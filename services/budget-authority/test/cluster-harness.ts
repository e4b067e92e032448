import { startRedisCluster, type LocalRedisCluster, serverBinary } from '@holdfast/testkit';
import type { NatsNames } from '@holdfast/events';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect } from 'vitest';
import { createRedis, slotOf, type RedisClient } from '../src/redis.js';
import { startTestAuthority, type TestAuthority } from '../src/testing.js';

/**
 * A Redis Cluster for a test file (3 masters with a replica each, on free ports, started
 * before its tests), a cluster client of it, and what the cluster tests start on it.
 */
export function useRedisCluster(): { cluster: () => LocalRedisCluster; admin: () => RedisClient } {
  let cluster: LocalRedisCluster | undefined;
  let admin: RedisClient | undefined;
  beforeAll(async () => {
    const bin = serverBinary('redis');
    cluster = await startRedisCluster(bin, {
      masters: 3,
      replicasPerMaster: 1,
      nodeTimeoutMs: 1_000,
    });
    admin = createRedis({ nodes: cluster.url.split(','), cluster: true }, 5_000);
    admin.on('error', () => undefined);
    await admin.connect();
  }, 60_000);
  afterAll(async () => {
    admin?.disconnect();
    await cluster?.stop();
  });
  return { cluster: () => cluster!, admin: () => admin! };
}

/** 12 org names, 4 on each master (an org's keys all live in the slot of its hash tag). */
export async function spreadOrgs(
  cluster: LocalRedisCluster,
  token: string,
): Promise<{ orgs: string[]; masterOf: Map<string, number> }> {
  const masters = await cluster.masters();
  expect(masters).toHaveLength(3);
  const byMaster = new Map<number, string[]>(masters.map((m) => [m, []]));
  const masterOf = new Map<string, number>();
  for (let i = 0; [...byMaster.values()].some((l) => l.length < 4); i++) {
    const org = `${token}-org${i}`;
    const m = await cluster.masterOf(slotOf(org));
    const list = byMaster.get(m)!;
    if (list.length < 4) {
      list.push(org);
      masterOf.set(org, m);
    }
  }
  const orgs = [...byMaster.values()].flat();
  expect(new Set(orgs.map((o) => masterOf.get(o))).size).toBe(3);
  return { orgs, masterOf };
}

/** 3 authority replicas on the cluster, each write waiting for 1 replica. */
export async function clusterReplicas(
  cluster: LocalRedisCluster,
  iso: { keyPrefix: string; names: NatsNames },
  { nc, natsUrl }: { nc: NatsConnection; natsUrl: string },
  config: unknown,
): Promise<TestAuthority[]> {
  return Promise.all(
    [0, 1, 2].map(() =>
      startTestAuthority({
        natsUrl,
        redisUrl: cluster.url,
        nc,
        names: iso.names,
        keyPrefix: iso.keyPrefix,
        config,
        clock: false,
        sweepIntervalMs: 200,
        // Generous for a loaded 2-core box running a whole cluster: a WAIT that times out
        // fails the call closed, which the no-fault test counts as an error.
        durability: { replicas: 1, timeoutMs: 2_000 },
        redisTimeoutMs: 3_000,
      }),
    ),
  );
}
