import type { RedisTarget } from '@holdfast/config';
import calculateSlot from 'cluster-key-slot';
import { Cluster, Redis, type ChainableCommander, type RedisOptions } from 'ioredis';
import { corkEachTurn } from './cork.js';

/** One Redis, or a Redis Cluster: every part of the authority takes either. */
export type RedisClient = Redis | Cluster;

function nodeOptions(url: string): RedisOptions & { host: string; port: number } {
  const u = new URL(url);
  return {
    host: u.hostname,
    port: Number(u.port || 6379),
    ...(u.username ? { username: decodeURIComponent(u.username) } : {}),
    ...(u.password ? { password: decodeURIComponent(u.password) } : {}),
    ...(u.protocol === 'rediss:' ? { tls: {} } : {}),
  };
}

/**
 * The authority's command connection (the authority and its rebuild tool open Redis only
 * here). No offline queue and a command timeout: while Redis is down a request fails at once
 * with budget_store_unavailable instead of waiting (fail closed). No auto-pipelining: it made
 * the Lua path slower on this hardware (measured here); instead each node's socket is corked
 * for a turn of the event loop (cork.ts), so a batch's script calls leave in one write. On
 * Redis Cluster the same holds per node: a
 * master that is down fails the orgs whose slots it serves, the others go on; MOVED and ASK
 * (resharding, a promoted replica) are followed and the slot map refreshed.
 */
export function createRedis(target: RedisTarget | string, commandTimeoutMs = 1_000): RedisClient {
  const t = typeof target === 'string' ? { nodes: [target], cluster: false } : target;
  const retryStrategy = (times: number) => Math.min(times * 100, 1_000);
  if (!t.cluster) {
    const redis = new Redis(t.nodes[0]!, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: commandTimeoutMs,
      retryStrategy,
      lazyConnect: true,
    });
    corkEachTurn(redis);
    return redis;
  }
  const nodes = t.nodes.map(nodeOptions);
  const { host: _h, port: _p, ...auth } = nodes[0]!;
  const cluster = new Cluster(
    nodes.map(({ host, port }) => ({ host, port })),
    {
      lazyConnect: true,
      enableOfflineQueue: false,
      clusterRetryStrategy: retryStrategy,
      // A command for a master that just went away is retried on the refreshed slot map a
      // few times (its replica may be promoted meanwhile), then fails closed.
      maxRedirections: 8,
      retryDelayOnFailover: 100,
      retryDelayOnClusterDown: 100,
      retryDelayOnTryAgain: 100,
      slotsRefreshTimeout: 1_000,
      slotsRefreshInterval: 2_000,
      redisOptions: {
        ...auth,
        maxRetriesPerRequest: 0,
        commandTimeout: commandTimeoutMs,
      },
    },
  );
  cluster.on('+node', (node: Redis) => corkEachTurn(node));
  return cluster;
}

export function isCluster(redis: RedisClient): redis is Cluster {
  return redis instanceof Cluster;
}

/** The connections a whole-keyspace command (SCAN, INFO, FUNCTION LOAD) must run on: every master. */
export function masters(redis: RedisClient): Redis[] {
  return isCluster(redis) ? redis.nodes('master') : [redis];
}

/** Every key under `match` on every master (SCAN runs per node on Redis Cluster). */
export async function scanAll(redis: RedisClient, match: string): Promise<string[]> {
  const out: string[] = [];
  for (const node of masters(redis)) {
    let cursor = '0';
    do {
      const [next, batch] = await node.scan(cursor, 'MATCH', match, 'COUNT', 1_000);
      cursor = next;
      out.push(...batch);
    } while (cursor !== '0');
  }
  return [...new Set(out)];
}

export const slotOf = (key: string): number => calculateSlot(key);

/**
 * Commands on keys of many slots, sent as few round trips as the topology allows: one
 * pipeline on a single Redis, one per slot on Redis Cluster (a cluster pipeline or multi-key
 * command must stay in one slot). Results come back in the order the commands were added.
 */
export class SlotBatch {
  readonly #redis: RedisClient;
  readonly #ops: { key: string; add: (p: ChainableCommander) => void }[] = [];

  constructor(redis: RedisClient) {
    this.#redis = redis;
  }

  get length(): number {
    return this.#ops.length;
  }

  add(key: string, add: (p: ChainableCommander) => void): this {
    this.#ops.push({ key, add });
    return this;
  }

  async exec(): Promise<[Error | null, unknown][]> {
    const groups = new Map<number, number[]>();
    this.#ops.forEach((op, i) => {
      const slot = isCluster(this.#redis) ? slotOf(op.key) : 0;
      const g = groups.get(slot);
      if (g) g.push(i);
      else groups.set(slot, [i]);
    });
    const out = new Array<[Error | null, unknown]>(this.#ops.length);
    await Promise.all(
      [...groups.values()].map(async (indexes) => {
        const p = this.#redis.pipeline();
        for (const i of indexes) this.#ops[i]!.add(p);
        // One slot's node failing (a master down) fails its own commands, not the others'.
        const replies = await p.exec().catch((err: unknown) => {
          const e = err instanceof Error ? err : new Error(String(err));
          return indexes.map(() => [e, null] as [Error, null]);
        });
        indexes.forEach((i, j) => (out[i] = replies?.[j] ?? [new Error('no reply'), null]));
      }),
    );
    return out;
  }
}

/** Groups keys by slot (one group on a single Redis), for multi-key commands such as DEL. */
export function keysBySlot(redis: RedisClient, keys: string[], max = 500): string[][] {
  const groups = new Map<number, string[]>();
  for (const k of keys) {
    const slot = isCluster(redis) ? slotOf(k) : 0;
    const g = groups.get(slot);
    if (g) g.push(k);
    else groups.set(slot, [k]);
  }
  const out: string[][] = [];
  for (const g of groups.values())
    for (let i = 0; i < g.length; i += max) out.push(g.slice(i, i + max));
  return out;
}
