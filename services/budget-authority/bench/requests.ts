/**
 * What the script benches send (scripts.bench.ts, durability.bench.ts): an org with a team
 * under it and three windows (limits no run reaches), one admission and its settlement.
 * BENCH_OWN=1: the calls by the team's key k1, which has a day budget, for one of 100 end
 * users, who have one too (five windows); then admits of new end users at the team's
 * maxEndUsers (BENCH_MAX_END_USERS, 1,000), refused, from an edge that remembers them.
 * `startBenchAuthority` starts the authority they send them to.
 */
import { randomUUID } from 'node:crypto';
import { namesWithPrefix } from '@holdfast/events';
import type { NatsConnection } from '@nats-io/transport-node';
import { startTestAuthority, type TestAuthorityOptions } from '../src/testing.js';

const OWN = process.env.BENCH_OWN === '1';
/** The team's maxEndUsers (BENCH_OWN): the refusal phases fill its registry to it. */
export const MAX_END_USERS = Number(process.env.BENCH_MAX_END_USERS ?? 1_000);
let calls = 0;
export const CONFIG = {
  upstreams: [{ id: 'u', baseUrl: 'http://127.0.0.1:1/v1' }],
  models: [{ id: 'gpt-4o-mini', upstream: 'u', price: { inputPerMTok: 0.15, outputPerMTok: 0.6 } }],
  tenants: [
    { id: 'acme', budgets: [{ window: 'month', limit: 1e12 }] },
    {
      id: 'team',
      parent: 'acme',
      budgets: [
        { window: 'minute', limit: 1e12 },
        { window: 'day', limit: 1e6, unit: 'usd' },
      ],
      useCases: [{ id: 'uc', maxTokens: 1_024, models: ['gpt-4o-mini'] }],
      ...(OWN
        ? {
            keys: [{ id: 'k1', sha256: 'a'.repeat(64), budgets: [{ window: 'day', limit: 1e12 }] }],
            endUserBudgets: [{ window: 'day', limit: 1e12 }],
            maxEndUsers: MAX_END_USERS,
          }
        : {}),
    },
  ],
};

export const admitRequest = (reservationId: string) => ({
  reservationId,
  tenant: 'team',
  keyId: OWN ? 'k1' : null,
  ...(OWN ? { endUser: `u${calls++ % 100}` } : {}),
  useCase: 'uc',
  model: 'gpt-4o-mini',
  promptTokens: 370,
  maxTokens: 1_024,
  extensible: true,
  audioInput: false,
  audioOutput: false,
  serviceTier: 'default',
  api: 'chat' as const,
});

export const settleRequest = (reservationId: string) => ({
  reservationId,
  tenant: 'team',
  org: 'acme',
  usage: {
    promptTokens: 370,
    completionTokens: 500,
    cachedPromptTokens: 0,
    cacheWrite5mTokens: 0,
    cacheWrite1hTokens: 0,
    reasoningTokens: 0,
    audioPromptTokens: 0,
    audioCompletionTokens: 0,
  },
  outcome: 'completed' as const,
});

/**
 * An authority in this process with `CONFIG` under a fresh key and subject prefix, started as
 * every test starts it (the service's own sweep interval, Redis TIME); `prefix` for the keys.
 */
export async function startBenchAuthority(opts: {
  natsUrl: string;
  nc: NatsConnection;
  redisUrl: string;
  redisTimeoutMs: number;
  durability?: TestAuthorityOptions['durability'];
}) {
  const prefix = `bench-${randomUUID().slice(0, 8)}`;
  const started = await startTestAuthority({
    ...opts,
    names: namesWithPrefix(prefix),
    keyPrefix: prefix,
    config: CONFIG,
    clock: false,
    sweepIntervalMs: 1_000,
  });
  return { ...started, prefix };
}
