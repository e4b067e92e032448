import { randomUUID } from 'node:crypto';
import { type Admitted, type UsageReply, type NatsNames, type Refused } from '@holdfast/events';
import { natsNamesToEnv } from '@holdfast/config';
import { createLogger, type AuthorityClient } from '@holdfast/runtime';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import {
  infraTest,
  startNatsServer,
  startOwnRedis,
  waitFor,
  type Isolation,
  serverBinary,
} from '@holdfast/testkit';
import {
  startTestAuthority,
  type TestAuthority,
  type TestAuthorityOptions,
} from '../src/testing.js';
import { createRedis, scanAll, type RedisClient } from '../src/redis.js';
import { ConfigStore } from '../src/config-store.js';
import { Keys } from '../src/keys.js';

export { readEvents } from '@holdfast/testkit';

export const newId = (): string => randomUUID();

/** An admit of support-bot's UC-101 on gpt-4o-mini (BASE_CONFIG), by no key. */
export function miniCall(promptTokens: number, maxTokens: number, reservationId = newId()) {
  return {
    reservationId,
    tenant: 'support-bot',
    keyId: null,
    useCase: 'UC-101',
    model: 'gpt-4o-mini',
    promptTokens,
    maxTokens,
  };
}

/**
 * An authority (BASE_CONFIG unless `extra` says) on a Redis of the test's own, so pausing or
 * stopping that Redis disturbs no other test, and an admin connection to it.
 */
export async function onPrivateRedis(
  f: { nc: NatsConnection; natsUrl: string; iso: Isolation },
  extra: Partial<TestAuthorityOptions> = {},
) {
  const server = await startOwnRedis();
  const h = await startTestAuthority({
    natsUrl: f.natsUrl,
    redisUrl: server.url,
    nc: f.nc,
    names: f.iso.names,
    keyPrefix: f.iso.keyPrefix,
    config: BASE_CONFIG,
    ...extra,
  });
  return { server, h, admin: server.admin };
}

/** The environment of a real authority process (dist/main.js) on a test's isolated names. */
export function processEnv(o: {
  natsUrl: string;
  redisUrl: string;
  iso: { keyPrefix: string; names: NatsNames };
  configFile: string;
}): Record<string, string> {
  return {
    NATS_URL: o.natsUrl,
    REDIS_URL: o.redisUrl,
    HOLDFAST_CONFIG: o.configFile,
    HOLDFAST_KEY_PREFIX: o.iso.keyPrefix,
    AUTHORITY_OPS_PORT: '0',
    ...natsNamesToEnv(o.iso.names),
  };
}

/** A config with the experiment's teams (seeds/000) plus an org hierarchy and a usd budget. */
export const BASE_CONFIG = {
  upstreams: [{ id: 'default', baseUrl: 'http://127.0.0.1:8089/v1' }],
  models: [
    {
      id: 'gpt-4o-mini',
      upstream: 'default',
      tokenizer: 'o200k_base',
      maxOutputTokens: 16_384,
      price: { inputPerMTok: 0.15, outputPerMTok: 0.6, cachedInputPerMTok: 0.075 },
    },
    {
      id: 'gpt-4o',
      upstream: 'default',
      tokenizer: 'o200k_base',
      price: { inputPerMTok: 2.5, outputPerMTok: 10 },
    },
  ],
  tenants: [
    {
      id: 'batch-summariser',
      maxInFlight: 32,
      budgets: [{ window: 'month', limit: 40_000, unit: 'tokens' }],
      useCases: [{ id: 'UC-112', maxTokens: 1_024, models: ['gpt-4o-mini'] }],
    },
    {
      id: 'support-bot',
      budgets: [{ window: 'month', limit: 60_000, unit: 'tokens' }],
      useCases: [{ id: 'UC-101', maxTokens: 512, models: ['gpt-4o-mini'] }],
    },
  ],
};

type AdmitResult = Awaited<ReturnType<AuthorityClient['admit']>>;

/** The refusal inside an admit result; fails the test when the call was admitted or errored. */
export function refusalOf(r: AdmitResult): Extract<Refused, { admitted: false }> {
  if (!r.ok) throw new Error(`admit failed: ${r.error.code} ${r.error.message}`);
  if (r.value.admitted) throw new Error('expected a refusal, got an admission');
  return r.value;
}

/** The admission inside an admit result; fails the test otherwise. */
export function admissionOf(r: AdmitResult): Admitted {
  if (!r.ok) throw new Error(`admit failed: ${r.error.code} ${r.error.message}`);
  if (!r.value.admitted)
    throw new Error(`expected an admission, got ${r.value.code}: ${r.value.message}`);
  return r.value;
}

/**
 * infraTest plus `start(config)`: an in-process authority on the test's isolated names, with a
 * movable clock, stopped after the test.
 */
export const authorityTest = infraTest.extend<{
  start: (config: unknown) => Promise<TestAuthority>;
}>({
  start: async ({ nc, natsUrl, redisUrl, iso }, use) => {
    const started: TestAuthority[] = [];
    await use(async (config) => {
      const h = await startTestAuthority({
        natsUrl,
        redisUrl,
        nc,
        names: iso.names,
        keyPrefix: iso.keyPrefix,
        config,
      });
      started.push(h);
      return h;
    });
    await Promise.all(started.map((h) => h.stop()));
  },
});

/**
 * Waits until nothing is held anywhere (every hold settled, released or expired) and every
 * outbox under the prefix has drained to JetStream; returns the usage of every tenant then.
 */
export async function quiescent(
  client: AuthorityClient,
  redis: RedisClient,
  keyPrefix: string,
  timeoutMs = 20_000,
): Promise<UsageReply> {
  const usage = await waitFor(
    async () => {
      const u = await client.usage({});
      return u.ok &&
        u.value.tenants.every(
          (t) =>
            t.inFlight === 0 &&
            [t.windows, ...t.keys.map((k) => k.windows), ...t.endUsers.map((e) => e.windows)].every(
              (list) => list.every((w) => w.held === 0),
            ),
        )
        ? u.value
        : undefined;
    },
    { timeoutMs, what: 'every hold settled, released or expired' },
  );
  await waitFor(
    async () => {
      // Rate-limited refusals wait in these until the sweeper writes their summary events.
      const summaries = await scanAll(redis, `${keyPrefix}:*:refusals`);
      const pending = await Promise.all(summaries.map((k) => redis.hlen(k)));
      const outboxes = await scanAll(redis, `${keyPrefix}:*:outbox`);
      if (pending.some((n) => n > 0)) return false;
      const lengths = await Promise.all(outboxes.map((k) => redis.xlen(k)));
      return lengths.every((n) => n === 0);
    },
    { timeoutMs, what: 'outboxes drained' },
  );
  return usage;
}

/**
 * Runs `fn` against an authority on a nats-server of its own whose `max_payload` is
 * `maxPayload` bytes (Redis is the test's), with a connection to that server; then stops all.
 */
export async function withPayloadLimit(
  maxPayload: number,
  o: { redisUrl: string; iso: Isolation; config: unknown },
  fn: (h: TestAuthority, nc: NatsConnection) => Promise<void>,
): Promise<void> {
  const server = await startNatsServer(serverBinary('nats'), `max_payload: ${maxPayload}`);
  const nc = await connect({ servers: server.url });
  try {
    const h = await startTestAuthority({
      natsUrl: server.url,
      redisUrl: o.redisUrl,
      nc,
      names: o.iso.names,
      keyPrefix: o.iso.keyPrefix,
      config: o.config,
    });
    try {
      await fn(h, nc);
    } finally {
      await h.stop();
    }
  } finally {
    await nc.close();
    await server.stop();
  }
}

/**
 * Applies `document` as another replica would (its own store on the same Redis), without the
 * config.changed notice: `h` serves its old version until its poll. Returns the new version.
 */
export async function applyOnAnotherReplica(
  h: TestAuthority,
  keyPrefix: string,
  document: unknown,
): Promise<number> {
  const redis = createRedis(h.redisUrl);
  await redis.connect();
  try {
    const other = new ConfigStore({
      redis,
      keys: new Keys(keyPrefix),
      logger: createLogger({ name: 'other-replica', level: 'silent' }),
      clock: Date.now,
    });
    const applied = await other.apply(document, 'admin');
    if (!applied.ok) throw new Error(applied.error.message);
    return applied.value.version;
  } finally {
    redis.disconnect();
  }
}

/**
 * Runs `first` once, just before the authority's next script call that `at` matches (its name,
 * its arguments): another request lands between two steps of one, on the same Redis.
 */
export function landsBefore(
  h: TestAuthority,
  at: (fn: string, args: unknown[]) => boolean,
  first: () => Promise<void>,
): void {
  const redis = h.authority.ctx.redis as unknown as Record<string, unknown>;
  const fcall = redis.fcall as (...a: unknown[]) => Promise<unknown>;
  let done = false;
  redis.fcall = async (...a: unknown[]) => {
    if (!done && at(String(a[0]), a.slice(2))) {
      done = true;
      await first();
    }
    return fcall.apply(redis, a);
  };
}
