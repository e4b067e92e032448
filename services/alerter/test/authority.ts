import { randomUUID } from 'node:crypto';
import { Authority, createRedis } from '@holdfast/budget-authority';
import type { AdmitRequest, NatsNames } from '@holdfast/events';
import { AuthorityClient, createLogger } from '@holdfast/runtime';
import type { NatsConnection } from '@nats-io/transport-node';
import { Registry } from 'prom-client';

/**
 * The real budget authority, in this process, on the test's isolated names and Redis prefix,
 * with a clock the test can move (to age usage out of a sliding window).
 */
export async function startAuthority(opts: {
  redisUrl: string;
  nc: NatsConnection;
  names: NatsNames;
  keyPrefix: string;
  config: unknown;
}) {
  const clock = { now: Date.now() };
  const redis = createRedis(opts.redisUrl);
  await redis.connect();
  const authority = new Authority({
    redis,
    nc: opts.nc,
    names: opts.names,
    logger: createLogger({ name: 'authority-test', level: 'silent' }),
    registry: new Registry(),
    keyPrefix: opts.keyPrefix,
    clock: () => clock.now,
    sweepIntervalMs: 100,
    relayLeaseMs: 1_000,
  });
  await authority.start();
  const applied = await authority.ctx.config.apply(opts.config, 'test');
  if (!applied.ok) throw new Error(applied.error.message);
  return {
    clock,
    client: new AuthorityClient({ nc: opts.nc, names: opts.names, timeoutMs: 5_000 }),
    stop: async () => {
      await authority.stop();
      redis.disconnect();
    },
  };
}

export function call(tenant: string, promptTokens = 100, maxTokens = 900): AdmitRequest {
  return {
    reservationId: randomUUID(),
    tenant,
    keyId: null,
    useCase: 'UC-1',
    model: 'gpt-4o-mini',
    promptTokens,
    maxTokens,
  };
}
