import { BaseError } from '@holdfast/runtime';
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
  /**
   * Connections the waited writes are spread over (default 8). Redis holds a connection's
   * later commands while a WAIT on it blocks, so on one connection every write waits for the
   * one before it to replicate; several let that many wait at once.
   */
  connections?: number;
}

interface Setting extends Durability {
  pool: RedisClient[];
  next: number;
}

const settings = new WeakMap<RedisClient, Setting>();

/**
 * Sets what every write script on this connection waits for (see `durably`). With replicas to
 * wait for, opens the pool the waited writes go through (duplicates of `redis`); `close` ends
 * them.
 */
export async function setDurability(
  redis: RedisClient,
  d: Durability,
): Promise<{ close: () => void }> {
  const pool: RedisClient[] = [];
  if (d.replicas > 0) {
    for (let i = 0; i < Math.max(1, d.connections ?? 8); i++) {
      const c = redis.duplicate();
      c.on('error', () => undefined);
      pool.push(c);
    }
    await Promise.all(pool.map((c) => c.connect()));
  }
  settings.set(redis, { ...d, pool, next: 0 });
  return { close: () => pool.forEach((c) => c.disconnect()) };
}

/**
 * A write that reached its master but not the replicas asked for in time: the authority fails
 * closed (budget_store_unavailable) rather than acknowledge what a failover could lose. The
 * write may still stand; `reply` is its answer so the caller can undo it (an admission's hold).
 */
export class NotReplicatedError extends BaseError<'not_replicated'> {
  constructor(
    readonly reply: unknown,
    readonly acked: number,
    readonly wanted: number,
  ) {
    super({
      code: 'not_replicated',
      message: `write reached ${acked} of ${wanted} replicas in time`,
      retry: true,
      context: { acked, wanted },
    });
  }
}

/**
 * Runs one write (or several in one slot: the first one's reply is answered) and, when replicas
 * are asked for, `WAIT n timeout` right behind it in one pipeline: the same connection to the
 * same master (a cluster pipeline goes to the node of its keys), so WAIT counts the replicas
 * that have these writes.
 */
export async function durably<T>(
  redis: RedisClient,
  direct: () => Promise<T>,
  piped: (p: ChainableCommander) => void,
): Promise<T> {
  const d = settings.get(redis);
  if (!d || d.replicas <= 0 || d.pool.length === 0) return direct();
  const conn = d.pool[d.next++ % d.pool.length]!;
  const p = conn.pipeline();
  piped(p);
  p.wait(d.replicas, d.timeoutMs);
  const replies = (await p.exec()) ?? [];
  const wait = replies.pop();
  const write = replies[0];
  if (!write || !wait) throw new Error('pipeline gave no reply');
  const failed = replies.find(([err]) => err)?.[0];
  if (failed) throw failed;
  if (wait[0]) throw new NotReplicatedError(write[1], 0, d.replicas);
  const acked = Number(wait[1]);
  if (acked < d.replicas) throw new NotReplicatedError(write[1], acked, d.replicas);
  return write[1] as T;
}
