import { parseConfig } from '@holdfast/config';
import {
  CURRENT_SCHEMA_VERSION,
  type HoldfastEvent,
  type NatsNames,
  type ReservationSettled,
  type WindowState,
} from '@holdfast/events';
import { startTestAuthority } from '@holdfast/budget-authority/testing';
import { createLogger } from '@holdfast/runtime';
import { infraTest, readStream as readTestStream, type Isolation } from '@holdfast/testkit';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { randomUUID } from 'node:crypto';
import { Registry } from 'prom-client';
import { afterEach } from 'vitest';
import {
  alerterNames,
  DEFAULT_SETTINGS,
  startAlerter,
  type Alerter,
  type AlerterSettings,
} from '../src/index.js';
import { StateStore } from '../src/state-store.js';
import { Receiver } from './receiver.js';

export const SECRET = `whsec_${Buffer.from('holdfast alerter test secret 32b').toString('base64')}`;

/**
 * infraTest for the alerter. After each test, the alerter's own streams and bucket on the
 * test's names go (as infraTest's `nc` removes the events stream), whatever started them;
 * `receiver` is a webhook receiver that checks SECRET's signatures, stopped after the test.
 * Fixtures end after the file's cleanupAfterEach hooks: the replicas those stop are down first.
 */
export const alerterTest = infraTest.extend<{ alerterState: void; receiver: Receiver }>({
  alerterState: [
    async ({ nc, iso }, use) => {
      await use();
      await removeAlerterState(nc, iso.names);
    },
    { auto: true },
  ],
  // eslint-disable-next-line no-empty-pattern -- vitest fixtures take a destructured context
  receiver: async ({}, use) => {
    const receiver = await Receiver.start(SECRET);
    await use(receiver);
    await receiver.stop();
  },
});

/** Registers cleanups that run after each test of the file, last registered first. */
export function cleanupAfterEach(): (fn: () => Promise<void>) => void {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  return (fn) => void cleanups.push(fn);
}

/**
 * Settings that keep tests fast: quick retries, frequent flushes and polls. The event loop is
 * the default one (bursts) unless ALERTER_PULL_EVERY_MS says otherwise (0: consume()), so
 * every test can run on both.
 */
const FAST: Partial<AlerterSettings> = {
  ...(process.env.ALERTER_PULL_EVERY_MS === undefined
    ? {}
    : { pullEveryMs: Number(process.env.ALERTER_PULL_EVERY_MS) }),
  retry: { initialMs: 200, maxMs: 2_000, retryForMs: 600_000 },
  burnFlushMs: 100,
  usagePollMs: 200,
  webhookTimeoutMs: 2_000,
};

export interface Replica {
  alerter: Alerter;
  nc: NatsConnection;
  registry: Registry;
  stop(): Promise<void>;
}

/**
 * The real authority (on a clock the test moves, starting now) and one alerter replica on the
 * test's names, stopped by `cleanup` (the file's cleanupAfterEach); the replica reads
 * `alerterConfig`, the authority's config unless given.
 */
export async function startWithAuthority(
  ctx: { nc: NatsConnection; natsUrl: string; redisUrl: string; iso: Isolation },
  cleanup: (fn: () => Promise<void>) => void,
  config: unknown,
  alerterConfig: unknown = config,
) {
  const { iso, ...infra } = ctx;
  const { names, keyPrefix } = iso;
  const authority = await startTestAuthority({
    ...infra,
    names,
    keyPrefix,
    config,
    clockStartsAt: Date.now(),
  });
  cleanup(() => authority.stop());
  const replica = await startReplica({ natsUrl: infra.natsUrl, names, config: alerterConfig });
  cleanup(() => replica.stop());
  return { authority, replica, client: authority.client };
}

/** One alerter replica in this process, with its own NATS connection. */
export async function startReplica(opts: {
  natsUrl: string;
  names: NatsNames;
  config: unknown;
  settings?: Partial<AlerterSettings>;
  /** Re-read the config from the authority on `config.changed`, as the service does without a file. */
  configFromAuthority?: boolean;
}): Promise<Replica> {
  const parsed = parseConfig(opts.config);
  if (!parsed.ok) throw new Error(parsed.error.errors.join('\n'));
  const nc = await connect({ servers: opts.natsUrl, name: 'alerter-test' });
  const registry = new Registry();
  const alerter = await startAlerter({
    nc,
    names: opts.names,
    config: parsed.value,
    configFromAuthority: opts.configFromAuthority,
    logger: createLogger({ name: 'alerter-test', level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
    registry,
    settings: { ...DEFAULT_SETTINGS, ...FAST, ...opts.settings },
    secrets: { HOOK_SECRET: SECRET },
  });
  return {
    alerter,
    nc,
    registry,
    stop: async () => {
      await alerter.stop();
      await nc.drain();
    },
  };
}

/** Removes the alerter's own streams and bucket (infraTest's `nc` removes the events stream). */
async function removeAlerterState(nc: NatsConnection, names: NatsNames): Promise<void> {
  const own = alerterNames(names);
  const jsm = await jetstreamManager(nc);
  const streams = [own.webhookStream, own.legacyWebhookStream, own.logStream];
  for (const s of [...streams, `KV_${own.stateBucket}`]) {
    await jsm.streams.delete(s).catch(() => undefined);
  }
}

/** Every message of a stream, parsed as JSON, in order (testkit's readStream). */
export async function readStream<T = unknown>(
  nc: NatsConnection,
  stream: string,
  subjectPrefix = '',
): Promise<T[]> {
  return (await readTestStream(nc, stream, subjectPrefix)).map((m) => m.json<T>());
}

export { readEvents } from '@holdfast/testkit';

/**
 * true when every event was handled and every webhook job acked (nothing left to do): the
 * queue keeps acked jobs, so each webhook's consumer must have nothing pending, and every
 * webhook with jobs stored a consumer.
 */
export async function quiescent(nc: NatsConnection, names: NatsNames): Promise<boolean> {
  const jsm = await jetstreamManager(nc);
  const own = alerterNames(names);
  const c = await jsm.consumers.info(names.eventsStream, DEFAULT_SETTINGS.consumer);
  if (c.num_pending !== 0 || c.num_ack_pending !== 0) return false;
  const prefix = `${own.webhookSubjectPrefix}.`;
  const queue = await jsm.streams.info(own.webhookStream, { subjects_filter: `${prefix}>` });
  const consumers = await jsm.consumers.list(own.webhookStream).next();
  const covered = new Set(consumers.map((x) => x.config.filter_subject));
  return (
    consumers.every((x) => x.num_pending === 0 && x.num_ack_pending === 0) &&
    Object.keys(queue.state.subjects ?? {}).every((s) => covered.has(s))
  );
}

/**
 * A state store on the test's bucket that mirrors the windows, as the alerter's does; the
 * mirror stops after the test (`cleanup`: the file's cleanupAfterEach), then alerterTest
 * removes the bucket.
 */
export async function mirroredStore(
  nc: NatsConnection,
  names: NatsNames,
  cleanup: (fn: () => Promise<void>) => void,
): Promise<{ store: StateStore; bucket: string }> {
  const bucket = alerterNames(names).stateBucket;
  const store = await StateStore.open(nc, bucket);
  await store.mirror('win.');
  cleanup(() => Promise.resolve(store.stop()));
  return { store, bucket };
}

/** The alerter's state bucket, to look at records in tests. */
export async function stateBucket(nc: NatsConnection, names: NatsNames) {
  return new Kvm(nc).open(alerterNames(names).stateBucket);
}

/** A window as the authority reports it. */
export function window(
  tenant: string,
  limit: number,
  used: number,
  extra: Partial<WindowState> = {},
): WindowState {
  return {
    tenant,
    budget: 'month-tokens',
    window: 'month',
    unit: 'tokens',
    limit,
    used,
    held: 0,
    enforce: true,
    ...extra,
  };
}

/** An authority-shaped settlement: what the authority's outbox would publish. */
export function settled(opts: {
  tenant: string;
  org?: string;
  time: Date;
  charged: number;
  windows: WindowState[];
}): ReservationSettled {
  return {
    id: randomUUID(),
    schemaVersion: CURRENT_SCHEMA_VERSION,
    time: opts.time.toISOString(),
    tenant: opts.tenant,
    org: opts.org ?? opts.tenant,
    type: 'reservation.settled',
    reservationId: randomUUID(),
    keyId: null,
    useCase: 'UC-1',
    model: 'gpt-4o-mini',
    mode: 'reserve',
    api: 'chat',
    heldTokens: opts.charged,
    heldMicroUsd: 0,
    promptTokens: Math.floor(opts.charged / 2),
    completionTokens: opts.charged - Math.floor(opts.charged / 2),
    cachedPromptTokens: 0,
    cacheWrite5mTokens: 0,
    cacheWrite1hTokens: 0,
    reasoningTokens: 0,
    audioPromptTokens: 0,
    audioCompletionTokens: 0,
    billedTokens: opts.charged,
    costMicroUsd: 0,
    chargedTokens: opts.charged,
    chargedMicroUsd: 0,
    outcome: 'completed',
    durationMs: 100,
    windows: opts.windows,
  };
}

/** Publishes events the way the authority's relay does (subject per tenant and type, msgID). */
export async function publishEvents(
  nc: NatsConnection,
  names: NatsNames,
  events: HoldfastEvent[],
  concurrency = 1,
): Promise<void> {
  const js = jetstream(nc);
  const queue = [...events];
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let e = queue.shift(); e; e = queue.shift()) {
        await js.publish(`${names.eventsPrefix}.${e.tenant}.${e.type}`, JSON.stringify(e), {
          msgID: e.id,
        });
      }
    }),
  );
}

/** Percentiles of a list of numbers (nearest rank). */
export function percentiles(values: number[]): {
  n: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
} {
  const s = [...values].sort((a, b) => a - b);
  const at = (p: number) => s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
  return { n: s.length, p50: at(50), p95: at(95), p99: at(99), max: s.at(-1) ?? NaN };
}
