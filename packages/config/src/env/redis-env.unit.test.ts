import { expect, test } from 'vitest';
import { z } from 'zod';
import { parseEnv } from './env.js';
import { redisEnv, redisTarget } from './redis-env.js';

const schema = z.object(redisEnv);
const target = (env: Record<string, string>) => redisTarget(parseEnv(schema, env));

test('REDIS_URL is one Redis, or Redis Cluster when it lists nodes or REDIS_CLUSTER says so', () => {
  expect(target({})).toEqual({ nodes: ['redis://127.0.0.1:6379'], cluster: false });
  expect(target({ REDIS_URL: 'redis://a:7000, redis://b:7001,redis://c:7002' })).toEqual({
    nodes: ['redis://a:7000', 'redis://b:7001', 'redis://c:7002'],
    cluster: true,
  });
  // One startup node is enough for a cluster (it tells the client about the others).
  expect(target({ REDIS_URL: 'redis://a:7000', REDIS_CLUSTER: 'true' }).cluster).toBe(true);
  expect(
    target({ REDIS_URL: 'redis://a:7000,redis://b:7001', REDIS_CLUSTER: 'false' }).cluster,
  ).toBe(false);
  expect(target({ REDIS_CLUSTER: '' }).cluster).toBe(false);
});

test('a list with anything but redis:// URLs is refused, naming the variable', () => {
  expect(() => target({ REDIS_URL: 'redis://a:7000,nats://b:4222' })).toThrow(/REDIS_URL/);
  expect(() => target({ REDIS_URL: ' , ' })).toThrow(/REDIS_URL/);
  expect(() => target({ REDIS_CLUSTER: 'maybe' })).toThrow(/REDIS_CLUSTER/);
});
