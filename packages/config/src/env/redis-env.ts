import { z } from 'zod';

const nodeUrl = z.url().refine((u) => /^rediss?:\/\//.test(u), 'must be a redis:// URL');

/**
 * `REDIS_URL` and `REDIS_CLUSTER` of every service that talks to Redis: one URL, or several
 * comma-separated ones (Redis Cluster's startup nodes). A list, or `REDIS_CLUSTER=true`, means
 * Redis Cluster. Spread into a service's env schema, then read it with `redisTarget(env)`.
 */
export const redisEnv = {
  REDIS_URL: z
    .string()
    .default('redis://127.0.0.1:6379')
    .transform((s) =>
      s
        .split(',')
        .map((u) => u.trim())
        .filter((u) => u !== ''),
    )
    .pipe(z.array(nodeUrl).min(1, 'needs at least one redis:// URL')),
  REDIS_CLUSTER: z
    .enum(['true', 'false', '1', '0', 'yes', 'no', ''])
    .default('')
    .transform((v) => (v === '' ? undefined : v === 'true' || v === '1' || v === 'yes')),
};

/** Where Redis is: its node URLs, and whether they are a Redis Cluster. */
export interface RedisTarget {
  nodes: string[];
  cluster: boolean;
}

export function redisTarget(e: {
  REDIS_URL: string[];
  REDIS_CLUSTER: boolean | undefined;
}): RedisTarget {
  return { nodes: e.REDIS_URL, cluster: e.REDIS_CLUSTER ?? e.REDIS_URL.length > 1 };
}
