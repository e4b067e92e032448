import type { ChainableCommander } from 'ioredis';
import type { RedisClient } from './redis.js';

/**
 * How many replicas must have a write before the authority answers for it (Redis WAIT), and
 * how long to wait for them. 0: answer once the master has it (a single Redis, made durable
 * by its AOF with `appendfsync always`).
 */
export interface Durability {
  replicas: number;
  timeoutMs: number;
}

const settings = new WeakMap<RedisClient, Durability>();

/** Sets what every write script on this connection waits for (see `durably`). */
export function setDurability(redis: RedisClient, d: Durability): void {
  settings.set(redis, d);
}

export function durabilityOf(redis: RedisClient): Durability {
  return settings.get(redis) ?? { replicas: 0, timeoutMs: 0 };
}

/**
 * A write that reached its master but not the replicas asked for in time: the authority fails
 * closed (budget_store_unavailable) rather than acknowledge what a failover could lose. The
 * write may still stand; `reply` is its answer so the caller can undo it (an admission's hold).
 */
export class NotReplicatedError extends Error {
  constructor(
    readonly reply: unknown,
    readonly acked: number,
    readonly wanted: number,
  ) {
    super(`write reached ${acked} of ${wanted} replicas in time`);
    this.name = 'NotReplicatedError';
  }
}

/**
 * Runs one write and, when replicas are asked for, `WAIT n timeout` right behind it in one
 * pipeline: the same connection to the same master (a cluster pipeline goes to the node of its
 * keys), so WAIT counts the replicas that have this write.
 */
export async function durably<T>(
  redis: RedisClient,
  direct: () => Promise<T>,
  piped: (p: ChainableCommander) => void,
): Promise<T> {
  const d = durabilityOf(redis);
  if (d.replicas <= 0) return direct();
  const p = redis.pipeline();
  piped(p);
  p.wait(d.replicas, d.timeoutMs);
  const [write, wait] = (await p.exec()) ?? [];
  if (!write || !wait) throw new Error('pipeline gave no reply');
  if (write[0]) throw write[0];
  if (wait[0]) throw new NotReplicatedError(write[1], 0, d.replicas);
  const acked = Number(wait[1]);
  if (acked < d.replicas) throw new NotReplicatedError(write[1], acked, d.replicas);
  return write[1] as T;
}
