import { EnvError } from '@holdfast/config';
import { describe, expect, test } from 'vitest';
import { z } from 'zod';
import { loadServiceConfig, serviceEnv } from './env.js';

const Env = serviceEnv({ X_OPS_PORT: z.coerce.number().default(9199) });
const load = (source: NodeJS.ProcessEnv) =>
  loadServiceConfig(Env, source, (e) => ({ opsPort: e.X_OPS_PORT }));

describe('the shared service environment', () => {
  test('defaults: one local server, one replica, the default names', () => {
    const c = load({});
    expect(c.nats.servers).toEqual(['nats://127.0.0.1:4222']);
    expect(c.nats.replicas).toBe(1);
    expect(c.nats.names.eventsStream).toBe('HOLDFAST_EVENTS');
    expect(c.logLevel).toBe('info');
    expect(c.opsPort).toBe(9199);
  });

  test('NATS_URL takes a comma-separated list of servers', () => {
    const c = load({ NATS_URL: 'nats://a:4222, nats://b:4222,tls://c:4222' });
    expect(c.nats.servers).toEqual(['nats://a:4222', 'nats://b:4222', 'tls://c:4222']);
  });

  test('errors name the variable', () => {
    expect(() => load({ NATS_URL: 'nats://a:4222,http://b' })).toThrow(/NATS_URL/);
    expect(() => load({ NATS_URL: 'a:4222' })).toThrow(EnvError);
    expect(() => load({ HOLDFAST_STREAM_REPLICAS: '0' })).toThrow(/HOLDFAST_STREAM_REPLICAS/);
    expect(load({ HOLDFAST_STREAM_REPLICAS: '3' }).nats.replicas).toBe(3);
  });
});
