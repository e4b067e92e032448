import type { Redis } from 'ioredis';
import type { Writable } from 'node:stream';
import { isCluster, type RedisClient } from '../src/redis.js';

type Chunk = { chunk: unknown };

/**
 * Every write(2) a socket makes from now on, as the text of the chunks it carried. A
 * net.Socket hands Node one chunk (`_write`) or everything buffered behind a cork (`_writev`)
 * per system call.
 */
export function recordWrites(socket: Writable): string[] {
  const writes: string[] = [];
  const s = socket as unknown as {
    _write: (chunk: unknown, encoding: string, cb: (err?: Error | null) => void) => void;
    _writev: (chunks: Chunk[], cb: (err?: Error | null) => void) => void;
  };
  const write = s._write.bind(socket);
  const writev = s._writev.bind(socket);
  s._write = (chunk, encoding, cb) => {
    writes.push(String(chunk));
    write(chunk, encoding, cb);
  };
  s._writev = (chunks, cb) => {
    writes.push(chunks.map((c) => String(c.chunk)).join(''));
    writev(chunks, cb);
  };
  return writes;
}

/** The connection's single node (the authority's connection is one Redis in these tests). */
export function single(redis: RedisClient): Redis {
  if (isCluster(redis)) throw new Error('expected a single Redis');
  return redis;
}
