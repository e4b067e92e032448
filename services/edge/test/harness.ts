import type { Authority } from '@holdfast/budget-authority';
import { startTestAuthority } from '@holdfast/budget-authority/testing';
import type { HoldfastEvent, NatsNames, TenantUsage } from '@holdfast/events';
import { startMockUpstream, type BehaviourPatch, type MockUpstream } from '@holdfast/mock-upstream';
import { AuthorityClient, connectNats, createLogger } from '@holdfast/runtime';
import { infraTest, readEvents, waitFor } from '@holdfast/testkit';
import type { NatsConnection } from '@nats-io/transport-node';
import OpenAI, { APIError } from 'openai';
import { sha256Hex, startEdge, type RunningEdge, type StartEdgeOptions } from '../src/index.js';

/** Virtual keys of the test config; their sha256 is what the config stores. */
export const KEYS = {
  batch: 'sk-hf-batch-summariser-1',
  support: 'sk-hf-support-bot-1',
  finance: 'sk-hf-finance-ops-1',
  multi: 'sk-hf-multi-1',
} as const;

/**
 * How long the edge waits for the authority (EDGE_ADMIT_TIMEOUT_MS, 1 s in production). The
 * edge, the authority, the mock and the test share one event loop here: on a 2-core box at
 * load 10-20 an admit took 1.1 s, and the edge rightly answered 503 budget_authority_unavailable
 * to a test that asserts what a decided call gets. Tests of that timeout set their own.
 */
const ADMIT_TIMEOUT_MS = 10_000;

/**
 * An attempt's whole-call deadline (an upstream's `timeoutMs`). The mock answers in under a
 * second; 16 calls streamed at once on a box at load 10-20 ran past 5 s and got 504
 * upstream_timeout. Tests of a slow upstream set `firstByteTimeoutMs` or `idleTimeoutMs`.
 */
export const UPSTREAM_TIMEOUT_MS = 30_000;

/**
 * The edge options of every stack: that admit timeout, and short upstream backoff (failure
 * paths take milliseconds).
 */
const FAST = {
  admitTimeoutMs: ADMIT_TIMEOUT_MS,
  upstream: { retryBaseMs: 1, retryMaxMs: 5, retryAfterCapMs: 2_000 },
} as const;

/**
 * The experiment's teams (seeds/000): batch-summariser (40,000 tokens a month, cap 1,024),
 * support-bot (60,000, cap 512), finance-ops (20,000, cap 512); plus a failOpen team and one
 * with two use cases. `patch` edits the document before it is applied.
 */
export function testConfig(upstreamUrl: string, patch: (c: TestConfig) => void = () => {}) {
  const config = baseConfig(upstreamUrl);
  patch(config);
  return config;
}

/** The config document, loosely typed so tests can patch any field. */
// A type alias (not an interface), so it is assignable to the authority's document type.
export type TestConfig = {
  auth: { trustHeaders: boolean };
  upstreams: Array<Record<string, unknown> & { id: string }>;
  models: Array<Record<string, unknown> & { id: string }>;
  tenants: Array<Record<string, unknown> & { id: string }>;
};

/** The part of the config about one entry (`entry(c.tenants, 'support-bot').mode = 'post'`). */
export function entry<T extends { id: string }>(list: T[], id: string): T {
  const found = list.find((x) => x.id === id);
  if (!found) throw new Error(`no ${id} in the test config`);
  return found;
}

function baseConfig(upstreamUrl: string): TestConfig {
  return {
    auth: { trustHeaders: false },
    upstreams: [
      { id: 'default', baseUrl: upstreamUrl, timeoutMs: UPSTREAM_TIMEOUT_MS, maxRetries: 2 },
      { id: 'backup', baseUrl: upstreamUrl, timeoutMs: UPSTREAM_TIMEOUT_MS, maxRetries: 0 },
    ],
    models: [
      {
        id: 'gpt-4o-mini',
        upstream: 'default',
        fallbackUpstreams: [] as string[],
        tokenizer: 'o200k_base',
        maxOutputTokens: 16_384,
        price: { inputPerMTok: 0.15, outputPerMTok: 0.6, cachedInputPerMTok: 0.075 },
      },
      {
        id: 'text-embedding-3-small',
        upstream: 'default',
        tokenizer: 'cl100k_base',
        price: { inputPerMTok: 0.02, outputPerMTok: 0 },
      },
    ],
    tenants: [
      {
        id: 'batch-summariser',
        mode: 'reserve',
        maxInFlight: 32,
        failOpen: false,
        budgets: [{ window: 'month', limit: 40_000, unit: 'tokens' }],
        useCases: [{ id: 'UC-112', maxTokens: 1_024, models: ['gpt-4o-mini'] }],
        keys: [{ id: 'batch-1', sha256: sha256Hex(KEYS.batch) }],
      },
      {
        id: 'support-bot',
        mode: 'reserve',
        budgets: [
          { window: 'month', limit: 60_000, unit: 'tokens' },
          { window: 'day', limit: 5, unit: 'usd' },
        ],
        useCases: [
          { id: 'UC-101', maxTokens: 512, models: ['gpt-4o-mini', 'text-embedding-3-small'] },
        ],
        keys: [{ id: 'support-1', sha256: sha256Hex(KEYS.support) }],
      },
      {
        id: 'finance-ops',
        mode: 'reserve',
        failOpen: true,
        budgets: [{ window: 'month', limit: 20_000, unit: 'tokens' }],
        useCases: [{ id: 'UC-087', maxTokens: 512, models: ['gpt-4o-mini'] }],
        keys: [{ id: 'finance-1', sha256: sha256Hex(KEYS.finance) }],
      },
      {
        id: 'multi',
        budgets: [{ window: 'month', limit: 1_000_000, unit: 'tokens' }],
        useCases: [
          { id: 'UC-1', maxTokens: 256, models: ['gpt-4o-mini'] },
          { id: 'UC-2', maxTokens: 128, models: ['gpt-4o-mini'] },
        ],
        keys: [{ id: 'multi-1', sha256: sha256Hex(KEYS.multi), defaultUseCase: 'UC-2' }],
      },
    ],
  };
}

export interface Stack {
  upstream: MockUpstream;
  authority: Authority;
  /** A client of the authority, for reading usage. */
  client: AuthorityClient;
  edge: RunningEdge;
  /** The official client pointed at the edge (no SDK retries unless asked). */
  openai(key: string, opts?: ConstructorParameters<typeof OpenAI>[0]): OpenAI;
  usage(tenant: string): Promise<TenantUsage>;
  /** Waits until the tenant has no call in flight and holds nothing; returns its usage. */
  settled(tenant: string): Promise<TenantUsage>;
  /**
   * The events on the stream once `until` holds for them (the outbox relay is asynchronous);
   * by default once every hold on the stream is closed.
   */
  events(until?: (events: HoldfastEvent[]) => boolean): Promise<HoldfastEvent[]>;
  /** Stops the authority (its subscriptions go away; the edge then gets no_responders). */
  stopAuthority(): Promise<void>;
  /** Starts a new authority on the same Redis and names (after `stopAuthority`). */
  restartAuthority(): Promise<void>;
  /** Applies the test config through the authority's API (which announces it on NATS). */
  applyConfig(): Promise<void>;
}

export interface StackOptions {
  patch?: (c: TestConfig) => void;
  behaviour?: BehaviourPatch;
  edge?: Partial<Pick<StartEdgeOptions, 'options' | 'env' | 'logger'>>;
  upstreamApiKey?: string;
  /** false: start the edge before any config is applied (call `applyConfig()` later). */
  configured?: boolean;
  /** Another Redis than the test run's (a test that pauses or kills it); a list: a cluster. */
  redisUrl?: string;
  /**
   * A NATS server of the test's own (a test that stops it): the stack connects to it, and stops
   * it after everything else.
   */
  nats?: { url: string; stop: () => Promise<void> };
  /** Replicas each write of the authority waits for (Redis WAIT). */
  waitReplicas?: number;
  /** The authority's Redis command timeout (AUTHORITY_REDIS_TIMEOUT_MS; 1 s by default). */
  redisTimeoutMs?: number;
}

async function startStack(
  fx: {
    nc: NatsConnection;
    natsUrl: string;
    redisUrl: string;
    iso: { names: NatsNames; keyPrefix: string };
  },
  opts: StackOptions,
  cleanup: Array<() => Promise<void>>,
): Promise<Stack> {
  const { iso } = fx;
  const natsUrl = opts.nats?.url ?? fx.natsUrl;
  let nc = fx.nc;
  if (opts.nats) {
    cleanup.push(opts.nats.stop);
    const own = await connectNats({
      servers: opts.nats.url,
      name: 'edge-test-stack',
      logger: createLogger({ name: 'edge-test-stack', level: 'silent' }),
    });
    nc = own;
    cleanup.push(() => own.close());
  }
  const upstream = await startMockUpstream({
    port: 0,
    behaviour: opts.behaviour,
    ...(opts.upstreamApiKey ? { apiKey: opts.upstreamApiKey } : {}),
  });
  cleanup.push(() => upstream.stop());
  // The real clock (scripts on Redis TIME); no document: applyConfig applies it over NATS.
  const startAuthority = () =>
    startTestAuthority({
      natsUrl,
      redisUrl: opts.redisUrl ?? fx.redisUrl,
      nc,
      names: iso.names,
      keyPrefix: iso.keyPrefix,
      clock: false,
      ...(opts.waitReplicas ? { durability: { replicas: opts.waitReplicas, timeoutMs: 500 } } : {}),
      ...(opts.redisTimeoutMs ? { redisTimeoutMs: opts.redisTimeoutMs } : {}),
    });
  let running = await startAuthority();
  let authorityUp = true;
  const stopAuthority = async () => {
    if (!authorityUp) return;
    authorityUp = false;
    await running.stop();
  };
  const restartAuthority = async () => {
    if (authorityUp) return;
    running = await startAuthority();
    authorityUp = true;
  };
  cleanup.push(stopAuthority);
  const client = new AuthorityClient({ nc, names: iso.names, timeoutMs: 5_000 });
  // Retried as an operator would on the retryable codes (Redis slow on a loaded box): the same
  // document again changes nothing more.
  const applyConfig = async () => {
    for (let attempt = 1; ; attempt++) {
      const r = await client.configApply({ document: testConfig(upstream.url, opts.patch) });
      if (r.ok) return;
      const retryable = r.error.code === 'budget_store_unavailable' || r.error.code === 'timeout';
      if (!retryable || attempt === 5) throw new Error(`${r.error.code}: ${r.error.message}`);
      await new Promise((resolve) => setTimeout(resolve, 250 * attempt));
    }
  };
  if (opts.configured !== false) await applyConfig();
  const edge = await startEdge({
    nc,
    names: iso.names,
    ...opts.edge,
    options: {
      ...FAST,
      ...opts.edge?.options,
      upstream: { ...FAST.upstream, ...opts.edge?.options?.upstream },
    },
  });
  cleanup.push(() => edge.stop());
  // On a loaded box the edge's first config fetch can fail (it is not ready, and answers 503
  // "no configuration yet" until a retry loads it): a configured stack is handed over ready.
  if (opts.configured !== false) {
    await waitFor(async () => (await fetch(`${edge.url}/readyz`)).ok || undefined, {
      what: 'the edge to load its config',
      timeoutMs: 30_000,
    });
  }
  const usage = async (tenant: string) => {
    const r = await client.usage({ tenant });
    if (!r.ok) throw new Error(`usage failed: ${r.error.code}`);
    const t = r.value.tenants[0];
    if (!t) throw new Error(`no usage for ${tenant}`);
    return t;
  };
  return {
    upstream,
    get authority() {
      return running.authority;
    },
    client,
    edge,
    openai: (key, o) => new OpenAI({ baseURL: `${edge.url}/v1`, apiKey: key, maxRetries: 0, ...o }),
    usage,
    settled: (tenant) =>
      waitFor(
        async () => {
          const u = await usage(tenant);
          return u.inFlight === 0 && u.windows.every((w) => w.held === 0) ? u : undefined;
        },
        { what: `${tenant} to hold nothing` },
      ),
    events: (until = everyHoldClosed) =>
      waitFor(
        async () => {
          const events = await readEvents(nc, iso.names);
          return until(events) ? events : undefined;
        },
        { what: 'events' },
      ),
    stopAuthority,
    restartAuthority,
    applyConfig,
  };
}

/**
 * True once every reservation.created on the stream has its close (settled, released or
 * expired): `settled()` waits for Redis, and the outbox relay publishes the close a moment
 * later, so events read straight after it can miss the last closes.
 */
function everyHoldClosed(events: HoldfastEvent[]): boolean {
  const open = new Set<string>();
  for (const e of events) {
    if (e.type === 'reservation.created') open.add(e.reservationId);
  }
  for (const e of events) {
    if (
      e.type === 'reservation.settled' ||
      e.type === 'reservation.released' ||
      e.type === 'reservation.expired'
    ) {
      open.delete(e.reservationId);
    }
  }
  return open.size === 0;
}

/** infraTest plus `stack(opts)`: mock upstream, in-process authority, edge; stopped after. */
export const edgeTest = infraTest.extend<{ stack: (opts?: StackOptions) => Promise<Stack> }>({
  stack: async ({ nc, natsUrl, redisUrl, iso }, use) => {
    const cleanup: Array<() => Promise<void>> = [];
    await use((opts = {}) => startStack({ nc, natsUrl, redisUrl, iso }, opts, cleanup));
    for (const stop of cleanup.reverse()) await stop();
  },
});

/** A tenant's value of a metric on the edge's /metrics (other labels ignored), 0 when absent. */
export async function tenantMetric(s: Stack, name: string, tenant: string): Promise<number> {
  const text = (await s.edge.app.inject({ method: 'GET', url: '/metrics' })).body;
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`${name}{`) && l.includes(`tenant="${tenant}"`));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}

/** The edge's edge_open_body_bytes, off its /metrics. */
export async function openBodyBytes(s: Stack): Promise<number> {
  const text = (await s.edge.app.inject({ method: 'GET', url: '/metrics' })).body;
  return Number(/^edge_open_body_bytes(?:\{[^}]*\})? (\S+)$/m.exec(text)?.[1]);
}

/**
 * Tokens a model may have written into the socket, unread, when the edge hung up on it (a
 * client disconnect, a timeout, a suspension's cut): how many depends on how soon the mock
 * notices the close, so on the box's load (5 seen at 2 ms a token, 2 at 20 ms a token, on a
 * starved 2-core box in CI; 1 or fewer otherwise). The edge bills what it received: this bounds
 * its under-billing against the provider per cut call, never an overspend.
 */
export const UNREAD_AT_HANGUP = 8;

/** A chat body of about `words` prompt tokens (each word one o200k token). */
export function chat(words = 20, extra: Record<string, unknown> = {}) {
  const text = Array.from({ length: words }, (_, i) => (i % 2 ? 'budget' : 'report')).join(' ');
  return {
    model: 'gpt-4o-mini',
    messages: [{ role: 'user' as const, content: text }],
    ...extra,
  };
}

/** The error an official client call failed with (fails the test when it did not fail so). */
export async function apiError(p: Promise<unknown>): Promise<APIError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof APIError)) throw new Error(`expected an APIError, got ${String(err)}`);
  return err;
}

/** What the checks below read of the test's Redis. */
interface RedisReads {
  keys(pattern: string): Promise<string[]>;
  hget(key: string, field: string): Promise<string | null>;
  zcard(key: string): Promise<number>;
}

/** Waits until no window under the test's key prefix holds anything and no lease is left. */
export async function nothingHeldAnywhere(redis: RedisReads, keyPrefix: string): Promise<void> {
  await waitFor(
    async () => {
      const keys = await redis.keys(`${keyPrefix}:*`);
      const windows = keys.filter((k) => k.includes(':w:'));
      const held = await Promise.all(windows.map((k) => redis.hget(k, 'h')));
      // Every in-flight set, the org's lease index (its root level's) among them.
      const leases = keys.filter((k) => k.endsWith(':holds') || k.endsWith(':leases'));
      const live = await Promise.all(leases.map((k) => redis.zcard(k)));
      return held.every((h) => Number(h ?? 0) === 0) && live.every((n) => n === 0);
    },
    { what: 'no hold in any window, no lease left' },
  );
}
