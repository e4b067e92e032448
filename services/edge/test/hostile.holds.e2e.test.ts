import { randomUUID } from 'node:crypto';
import { closesStream } from '@holdfast/events';
import {
  startKillableRedis,
  startOwnRedis,
  startRestartableNatsServer,
  waitFor,
  serverBinary,
} from '@holdfast/testkit';
import { jetstreamManager } from '@nats-io/jetstream';
import type { Redis } from '@holdfast/testkit';
import { expect } from 'vitest';
import {
  apiError,
  chat,
  edgeTest as test,
  entry,
  KEYS,
  type Stack,
  type TestConfig,
} from './harness.js';

/**
 * Issue 11, "no hold leaks, whatever fails": every way a call can end without a clean answer
 * (a slow Redis, a client that leaves early, an admin moving or deleting its team, an
 * authority that is down when it ends, a call longer than its lease) leaves nothing held and
 * loses no usage.
 */

const eventsOf = (s: Stack, reservationId: string) =>
  s
    .events()
    .then((all) => all.filter((e) => 'reservationId' in e && e.reservationId === reservationId));

test('an admit Redis answers too late is released: the hold the script made is given back', async ({
  stack,
}) => {
  const redis = await startOwnRedis();
  try {
    const s = await stack({ redisUrl: redis.url, edge: { options: { admitTimeoutMs: 3_000 } } });
    // One call first, so this Redis holds the tenant's plan: the paused admit is then the
    // script that holds (a plan's first call is answered NOPLAN, holding nothing, and sent
    // again in full; that retry would come after the timeout).
    await s.openai(KEYS.support).chat.completions.create(chat(10));
    const before = await s.settled('support-bot');
    await redis.pause(1_500); // the authority's command timeout is 1 s
    const err = await apiError(s.openai(KEYS.support).chat.completions.create(chat(10)));
    expect(err.status).toBe(503);
    expect(err.code).toBe('budget_authority_unavailable');
    // Once Redis runs the queued script, its hold is there, and the edge's release closes it.
    const u = await s.settled('support-bot');
    expect(u.windows.map((w) => [w.held, w.used])).toEqual(before.windows.map((w) => [0, w.used]));
    const released = await s.events((e) => e.some((x) => x.type === 'reservation.released'));
    const release = released.find((e) => e.type === 'reservation.released') as
      { reservationId: string } | undefined;
    expect(release).toBeDefined();
    const closed = await eventsOf(s, release!.reservationId);
    expect(closed.map((e) => e.type)).toEqual(['reservation.created', 'reservation.released']);
    expect(closed[1]).toMatchObject({ reason: 'admit_abandoned' });
    expect(s.upstream.stats().recent).toHaveLength(1);
  } finally {
    await redis.stop();
  }
});

test('a client that leaves while its call is admitted is released, and the model never sees it', async ({
  stack,
}) => {
  const redis = await startOwnRedis();
  try {
    const s = await stack({ redisUrl: redis.url, edge: { options: { admitTimeoutMs: 3_000 } } });
    await redis.pause(600); // the admission waits; the client does not
    const err = await s
      .openai(KEYS.support)
      .chat.completions.create(chat(10), { signal: AbortSignal.timeout(200) })
      .catch((e: unknown) => e);
    expect(String(err)).toMatch(/abort/i);
    const released = await s.events((e) => e.some((x) => x.type === 'reservation.released'));
    expect(released.find((e) => e.type === 'reservation.released')).toMatchObject({
      reason: 'client_disconnected',
    });
    const u = await s.settled('support-bot');
    expect(u.windows.every((w) => w.used === 0)).toBe(true);
    expect(s.upstream.stats().recent).toHaveLength(0);
  } finally {
    await redis.stop();
  }
});

/** Streams slowly enough for an admin to change the config while the call runs. */
const slow = { completion: { mode: 'fixed' as const, tokens: 40 }, tokenDelayMs: 25 };

async function streamWhile(s: Stack, during: () => Promise<void>): Promise<string> {
  const stream = await s.openai(KEYS.support).chat.completions.create({
    ...chat(10),
    max_tokens: 100,
    stream: true,
  });
  let id = '';
  let changed = false;
  for await (const chunk of stream) {
    id ||= chunk.id;
    if (!changed) {
      changed = true;
      await during();
    }
  }
  return id;
}

const held = async (redis: Redis, key: string) => Number((await redis.hget(key, 'h')) ?? 0);

for (const change of ['moved under another org', 'removed from the config'] as const) {
  test(`a team ${change} while its call streams: the call's usage is billed and nothing stays held`, async ({
    stack,
    redis,
    iso,
  }) => {
    let patch = (_c: TestConfig) => {};
    const s = await stack({ behaviour: slow, patch: (c) => patch(c) });
    await streamWhile(s, async () => {
      patch =
        change === 'moved under another org'
          ? (c) => {
              c.tenants.push({ id: 'acme2', budgets: [] });
              entry(c.tenants, 'support-bot').parent = 'acme2';
            }
          : (c) => {
              c.tenants = c.tenants.filter((t) => t.id !== 'support-bot');
            };
      await s.applyConfig();
      await waitFor(() => s.edge.app.configSnapshot.version >= 2, { what: 'the edge on v2' });
    });
    const settled = await s.events((e) => e.some((x) => x.type === 'reservation.settled'));
    const billed = settled.find((e) => e.type === 'reservation.settled');
    expect(billed).toMatchObject({ tenant: 'support-bot', org: 'support-bot' });
    // The windows the hold was admitted against hold nothing any more, and carry the usage.
    const window = `${iso.keyPrefix}:{support-bot}:t:support-bot:w:month-tokens`;
    await waitFor(async () => (await held(redis, window)) === 0, {
      what: 'the hold given back',
    });
    const [call] = s.upstream.stats().recent;
    expect((billed as { billedTokens: number }).billedTokens).toBe(
      call!.promptTokens + call!.completionTokens,
    );
  });
}

test('expiry finds every hold, also of a tenant the config no longer has', async ({ stack }) => {
  let patch = (_c: TestConfig) => {};
  const s = await stack({ patch: (c) => patch(c) });
  const reservationId = randomUUID();
  const admitted = await s.client.admit({
    reservationId,
    tenant: 'support-bot',
    keyId: 'support-1',
    useCase: 'UC-101',
    model: 'gpt-4o-mini',
    promptTokens: 100,
    maxTokens: 400,
    leaseMs: 1_000,
  });
  expect(admitted.ok && admitted.value.admitted).toBe(true);
  patch = (c) => {
    c.tenants = c.tenants.filter((t) => t.id !== 'support-bot');
  };
  await s.applyConfig();
  const events = await s.events((e) => e.some((x) => x.type === 'reservation.expired'));
  // A reserve hold nobody closed is billed at its worst case: the books never show less.
  expect(events.find((e) => e.type === 'reservation.expired')).toMatchObject({
    reservationId,
    heldTokens: 500,
    chargedTokens: 500,
  });
});

test('settles the authority cannot take are kept in the closes stream and billed when it is back', async ({
  stack,
  nc,
  iso,
}) => {
  const s = await stack({
    behaviour: slow,
    edge: { options: { settleAttempts: 2, settleTimeoutMs: 200 } },
  });
  const id = await streamWhile(s, () => s.stopAuthority());
  expect(id).not.toBe('');
  const jsm = await jetstreamManager(nc);
  const stream = closesStream(iso.names).name;
  await waitFor(async () => (await jsm.streams.info(stream)).state.messages === 1, {
    what: 'the settle in the closes stream',
  });
  // This edge may even go away now: the close is in JetStream, not in its memory.
  await s.edge.stop();
  await s.restartAuthority();
  const u = await s.settled('support-bot');
  const [call] = s.upstream.stats().recent;
  expect(u.windows.find((w) => w.budget === 'month-tokens')?.used).toBe(
    call!.promptTokens + call!.completionTokens,
  );
  await waitFor(async () => (await jsm.streams.info(stream)).state.messages === 0, {
    what: 'the closes stream drained',
  });
});

test('a call that runs longer than its lease is renewed, not expired', async ({ stack }) => {
  const s = await stack({
    behaviour: { completion: { mode: 'fixed', tokens: 60 }, tokenDelayMs: 50 },
    patch: (c) => {
      entry(c.tenants, 'support-bot').leaseMs = 1_000;
    },
  });
  await streamWhile(s, () => Promise.resolve()); // about 3 s, three leases
  const u = await s.settled('support-bot');
  const events = await s.events((e) => e.some((x) => x.type === 'reservation.settled'));
  expect(events.map((e) => e.type)).not.toContain('reservation.expired');
  const [call] = s.upstream.stats().recent;
  expect(u.windows.find((w) => w.budget === 'month-tokens')?.used).toBe(
    call!.promptTokens + call!.completionTokens,
  );
});

test('a settle owed while the authority was away past the lease lands as soon as it is back', async ({
  stack,
}) => {
  const s = await stack({
    behaviour: slow,
    patch: (c) => (entry(c.tenants, 'support-bot').leaseMs = 1_000),
  });
  let stoppedAt = 0;
  await streamWhile(s, async () => {
    await s.stopAuthority();
    stoppedAt = performance.now();
  });
  // The settle fails from the stream's end, and backs off 0.1, 0.2, ... 3.2, 5 s: by now it
  // waits in a long step, and the hold's lease (1 s) ran out long ago.
  const awayMs = 4_500 - (performance.now() - stoppedAt);
  await new Promise((resolve) => setTimeout(resolve, awayMs));
  expect(s.edge.app.holds.pending).toBe(1);
  await s.restartAuthority();
  const lateMs = await msUntilLedgerExact(s);
  console.log(`[late settle] ledger exact ${lateMs} ms after the authority was ready`);
  expect(lateMs).toBeLessThan(1_000);
});

/**
 * Milliseconds from now until support-bot's ledger bills exactly what the mock billed for its
 * one call, nothing held or in flight (the late settle has landed).
 */
async function msUntilLedgerExact(s: Stack): Promise<number> {
  const from = performance.now();
  const [call] = s.upstream.stats().recent;
  const exact = call!.promptTokens + call!.completionTokens;
  await waitFor(
    async () => {
      // A short timeout: a read sent while this client was still reconnecting is lost, and
      // must not hold up the next one.
      const r = await s.client.usage({ tenant: 'support-bot' }, 250);
      const t = r.ok ? r.value.tenants[0] : undefined;
      const month = t?.windows.find((w) => w.budget === 'month-tokens');
      return t?.inFlight === 0 && month?.held === 0 && month.used === exact ? t : undefined;
    },
    { what: 'the late settle', timeoutMs: 15_000, intervalMs: 10 },
  );
  return Math.round(performance.now() - from);
}

test("a settle owed while the authority's Redis was away lands as soon as Redis is back", async ({
  stack,
}) => {
  const bin = serverBinary('redis');
  const redis = await startKillableRedis(bin, { appendfsync: 'always' });
  try {
    const s = await stack({ behaviour: slow, redisUrl: redis.url });
    let killedAt = 0;
    await streamWhile(s, () => {
      redis.kill();
      killedAt = performance.now();
      return Promise.resolve();
    });
    // The settle fails from the stream's end (budget_store_unavailable) and backs off 0.1,
    // 0.2, ... 3.2 s: by now it waits in a long step.
    await new Promise((resolve) => setTimeout(resolve, 4_500 - (performance.now() - killedAt)));
    expect(s.edge.app.holds.pending).toBe(1);
    await redis.restart();
    const lateMs = await msUntilLedgerExact(s);
    console.log(`[late settle] ledger exact ${lateMs} ms after Redis answered again`);
    // The authority reconnects within 1 s (its retry strategy), then says it serves again.
    expect(lateMs).toBeLessThan(2_000);
  } finally {
    await redis.stop();
  }
});

test('a settle owed while NATS was away lands as soon as NATS is back', async ({ stack }) => {
  const bin = serverBinary('nats');
  const nats = await startRestartableNatsServer(bin);
  // Settle attempts time out in 0.2 s, so by the time NATS is back the settle waits in a long
  // backoff step (0.1, 0.2, ... 1.6, 3.2 s).
  const s = await stack({ behaviour: slow, nats, edge: { options: { settleTimeoutMs: 200 } } });
  let haltedAt = 0;
  await streamWhile(s, async () => {
    await nats.halt();
    haltedAt = performance.now();
  });
  await new Promise((resolve) => setTimeout(resolve, 4_500 - (performance.now() - haltedAt)));
  expect(s.edge.app.holds.pending).toBe(1);
  await nats.restart();
  const lateMs = await msUntilLedgerExact(s);
  console.log(`[late settle] ledger exact ${lateMs} ms after NATS was back`);
  // Both clients reconnect within about 0.5 s (reconnectTimeWait); whichever is second wakes
  // the settle: the edge on its own reconnect, or the authority's start notice on its.
  expect(lateMs).toBeLessThan(1_500);
});
