import { describe, expect } from 'vitest';
import type { HoldfastEvent } from '@holdfast/events';
import { waitFor, type Isolation } from '@holdfast/testkit';
import type { NatsConnection } from '@nats-io/transport-node';
import { Keys } from '../src/keys.js';
import { stateKeys } from '../src/rebuild.js';
import type { RedisClient } from '../src/redis.js';
import type { TestAuthority } from '../src/testing.js';
import { admissionOf, authorityTest as test, BASE_CONFIG, newId, readEvents } from './harness.js';
import { activity, call, CONFIG, outboxesRelayed, rebuilder } from './rebuild-activity.js';

test('the budget state rebuilt from the event stream equals the state that wrote it', async ({
  start,
  nc,
  redis,
  iso,
}) => {
  const h = await start(CONFIG);
  const live = await activity(h);
  const keys = new Keys(iso.keyPrefix);
  await outboxesRelayed(redis, keys);
  const before = await h.client.usage({});
  expect(before.ok).toBe(true);
  // The end users key kk (maxEndUsers) named, and when it last did.
  const registry = keys.keyUsers('acme', 'team-k', 'kk');
  const named = await redis.zrange(registry, 0, -1, 'WITHSCORES');
  expect(named).toHaveLength(4);
  const now = h.clock.now;
  await h.stop();

  // Lose every budget key (the config stays), then rebuild from the stream.
  const lost = await stateKeys(redis, keys);
  expect(lost.length).toBeGreaterThan(10);
  await redis.del(...lost);
  const on = { redis, nc, names: iso.names, keys, now };
  expect(await rebuilder(on).run()).toMatchObject({ liveHolds: 4 });
  // A second rebuild refuses to mix with existing state.
  await expect(rebuilder(on).run()).rejects.toThrow(/already holds/);

  const h2 = await start(CONFIG);
  h2.clock.now = now;
  const after = await h2.client.usage({});
  expect(after.ok && after.value.tenants).toEqual(before.ok && before.value.tenants);
  expect(await redis.zrange(registry, 0, -1, 'WITHSCORES')).toEqual(named);
  expect(await redis.pttl(registry)).toBeGreaterThan(30 * 86_400_000);

  // The live holds carry on: they settle, grow and expire as if nothing happened.
  const settled = await h2.client.settle({
    reservationId: live[0]!,
    tenant: 'team-r',
    usage: { promptTokens: 108, completionTokens: 10 },
  });
  expect(settled).toMatchObject({ ok: true, value: { status: 'settled', billedTokens: 118 } });
  // The key's and end user's windows were rebuilt with it: its settle (naming neither) closes them.
  const keyed = await h2.client.settle({
    reservationId: live[2]!,
    tenant: 'team-k',
    usage: { promptTokens: 120, completionTokens: 5 },
  });
  expect(keyed).toMatchObject({ ok: true, value: { status: 'settled', billedTokens: 125 } });
  const k = await h2.client.usage({ tenant: 'team-k' });
  const kUsage = k.ok ? k.value.tenants[0]! : undefined;
  expect(kUsage?.endUsers.map((u) => u.id).sort()).toEqual(['x', 'y']);
  for (const w of [
    ...(kUsage?.keys.flatMap((x) => x.windows) ?? []),
    ...(kUsage?.endUsers.flatMap((x) => x.windows) ?? []),
  ])
    expect(w.held).toBe(0);
  const grown = await h2.client.extend({
    reservationId: live[3]!,
    tenant: 'team-a',
    outputTokens: 400,
  });
  expect(grown).toMatchObject({
    ok: true,
    value: { status: 'extended', coveredOutputTokens: 400 },
  });
  const usage = await h2.client.usage({ tenant: 'team-r' });
  expect(usage.ok && usage.value.tenants[0]?.inFlight).toBe(1);
  // The adaptive estimate was rebuilt too: a new call holds prompt + 100.
  expect(admissionOf(await h2.client.admit(call('team-a', 50, true))).heldTokens).toBe(150);
});

/**
 * A hold whose edge died (kill -9 mid-call) expires through its org's lease index, where the
 * sweeper does not know its tenant. Its expiry billed the worst case to every window it held
 * but its event listed none: the alerter saw no window cross (a team taken past 80% or to its
 * hard limit by the expiry got no alert and was never suspended, and the next event's window
 * was already above it), and a rebuild billed the expiry nowhere (the team's day window came
 * back 1,000 short, so it could spend 1,000 over its limit).
 */
test('a hold the sweeper expires: its event carries the windows it billed, and the rebuild bills them too', async ({
  start,
  nc,
  redis,
  iso,
}) => {
  const config = {
    ...BASE_CONFIG,
    tenants: [
      { id: 'org', budgets: [{ window: 'month', limit: 100_000 }] },
      {
        id: 'team',
        parent: 'org',
        budgets: [{ window: 'day', limit: 1_200 }],
        useCases: [{ id: 'uc', maxTokens: 1_000, models: ['gpt-4o-mini'] }],
        keys: [{ id: 'k', sha256: 'b'.repeat(64), budgets: [{ window: 'day', limit: 5_000 }] }],
      },
    ],
  };
  const h = await start(config);
  const reservationId = newId();
  admissionOf(
    await h.client.admit({
      reservationId,
      tenant: 'team',
      keyId: 'k',
      useCase: 'uc',
      model: 'gpt-4o-mini',
      promptTokens: 100,
      maxTokens: 900,
      leaseMs: 1_000,
    }),
  );
  const keys = new Keys(iso.keyPrefix);
  await waitFor(() => h.authority.relayedOrgs.includes('org'), { what: 'relay lease' });
  h.clock.advance(1_000);
  expect(await h.authority.expireOverdue()).toBe(1);
  await outboxesRelayed(redis, keys);
  const expired = await waitFor(async () =>
    (await readEvents(nc, iso.names)).find((e) => e.type === 'reservation.expired'),
  );
  // The worst case billed to the team's, the org's and the key's windows: 1,000 of the team's
  // 1,200 (83%), which the alerter reads off this event.
  expect(
    expired.windows.map((w) => [w.tenant, w.budget, w.scope ?? '', w.used, w.held]).sort(),
  ).toEqual([
    ['org', 'month-tokens', '', 1_000, 0],
    ['team', 'day-tokens', '', 1_000, 0],
    ['team', 'day-tokens', 'key', 1_000, 0],
  ]);
  const before = await h.client.usage({});
  const now = h.clock.now;
  await h.stop();

  await redis.del(...(await stateKeys(redis, keys)));
  await rebuilder({ redis, nc, names: iso.names, keys, now, config }).run();
  const h2 = await start(config);
  h2.clock.now = now;
  const after = await h2.client.usage({});
  expect(after.ok && after.value.tenants).toEqual(before.ok && before.value.tenants);
});

/**
 * A budget added while a call is in flight (or removed) is charged differently from the
 * call's other windows: close.lua bills an added window the whole usage on settle (neither the
 * admission nor an expiry charged it), and a removed one what the others get, though the close
 * event no longer lists it. The event's one `chargedTokens` said neither, so a rebuild came
 * back with another window than the live one (estimate: day 150 live, 50 rebuilt), and the
 * alerter's `before` (used less the event's charge) was off by as much.
 */
describe('windows a close charged differently from its event', () => {
  const one = (mode: string, budgets: Record<string, unknown>[]) => ({
    ...BASE_CONFIG,
    tenants: [
      {
        id: 'team',
        mode,
        budgets,
        useCases: [{ id: 'uc', maxTokens: 1_000, models: ['gpt-4o-mini'] }],
      },
    ],
  });
  const month = { window: 'month', limit: 10_000 };
  const day = { window: 'day', limit: 10_000 };
  const admit = (reservationId: string, leaseMs?: number) => ({
    reservationId,
    tenant: 'team',
    keyId: null,
    useCase: 'uc',
    model: 'gpt-4o-mini',
    promptTokens: 100,
    maxTokens: 400,
    ...(leaseMs ? { leaseMs } : {}),
  });
  const settle = (reservationId: string) => ({
    reservationId,
    tenant: 'team',
    usage: { promptTokens: 100, completionTokens: 50 },
  });
  const windowsOf = (e: HoldfastEvent | undefined) =>
    Object.fromEntries(
      (e && 'windows' in e ? e.windows : []).map((w) => [w.budget, [w.used, w.charged]]),
    );

  interface Infra {
    start: (c: unknown) => Promise<TestAuthority>;
    nc: NatsConnection;
    redis: RedisClient;
    iso: Isolation;
  }

  /** The test's first event of `type`, once every outbox has been relayed. */
  async function eventOf(type: HoldfastEvent['type'], o: Infra): Promise<HoldfastEvent> {
    await outboxesRelayed(o.redis, new Keys(o.iso.keyPrefix));
    return waitFor(async () => (await readEvents(o.nc, o.iso.names)).find((e) => e.type === type));
  }

  /** Stops `h`, loses every budget key, rebuilds under `config`: the usage must be the same. */
  async function rebuiltEqualsLive(h: TestAuthority, config: unknown, o: Infra): Promise<void> {
    const keys = new Keys(o.iso.keyPrefix);
    await outboxesRelayed(o.redis, keys);
    const before = await h.client.usage({});
    const now = h.clock.now;
    await h.stop();
    await o.redis.del(...(await stateKeys(o.redis, keys)));
    await rebuilder({ redis: o.redis, nc: o.nc, names: o.iso.names, keys, now, config }).run();
    const h2 = await o.start(config);
    h2.clock.now = now;
    const after = await h2.client.usage({});
    expect(after.ok && after.value.tenants).toEqual(before.ok && before.value.tenants);
  }

  /** reserve: a call held on the month window (lease 1 s), a day budget added, the hold expired. */
  async function expiredAfterAdding(o: Infra) {
    const h = await o.start(one('reserve', [month]));
    const id = newId();
    admissionOf(await h.client.admit(admit(id, 1_000)));
    const config = one('reserve', [month, day]);
    expect((await h.client.configApply({ document: config })).ok).toBe(true);
    await waitFor(() => h.authority.relayedOrgs.includes('team'), { what: 'relay lease' });
    h.clock.advance(1_000);
    expect(await h.authority.expireOverdue()).toBe(1);
    return { h, id, config };
  }

  test('estimate: a day budget added mid-call is billed the whole usage; its event says so, and the rebuild bills it too', async ({
    start,
    nc,
    redis,
    iso,
  }) => {
    const o = { start, nc, redis, iso };
    const h = await start(one('estimate', [month]));
    const id = newId();
    admissionOf(await h.client.admit(admit(id)));
    const config = one('estimate', [month, day]);
    expect((await h.client.configApply({ document: config })).ok).toBe(true);
    expect(await h.client.settle(settle(id))).toMatchObject({ ok: true });
    const settled = await eventOf('reservation.settled', o);
    // The event charged 50 (the prompt's 100 was charged at admission): the day window, which
    // the admission never charged, 150.
    expect(settled).toMatchObject({ chargedTokens: 50 });
    expect(windowsOf(settled)).toEqual({
      'month-tokens': [150, undefined],
      'day-tokens': [150, 150],
    });
    await rebuiltEqualsLive(h, config, o);
  });

  test('reserve: an expiry bills a day budget added mid-call nothing; its event says so, and the rebuild bills it nothing', async ({
    start,
    nc,
    redis,
    iso,
  }) => {
    const o = { start, nc, redis, iso };
    const { h, config } = await expiredAfterAdding(o);
    const expired = await eventOf('reservation.expired', o);
    expect(expired).toMatchObject({ chargedTokens: 500 });
    expect(windowsOf(expired)).toEqual({ 'month-tokens': [500, undefined], 'day-tokens': [0, 0] });
    await rebuiltEqualsLive(h, config, o);
  });

  test('reserve: a settle after that expiry bills the day window the whole usage; its event says so', async ({
    start,
    nc,
    redis,
    iso,
  }) => {
    const o = { start, nc, redis, iso };
    const { h, id, config } = await expiredAfterAdding(o);
    expect(await h.client.settle(settle(id))).toMatchObject({ ok: true });
    const settled = await eventOf('reservation.settled', o);
    // The month window gets back what the expiry billed past the usage (-350); the day window,
    // which the expiry did not bill, the usage.
    expect(settled).toMatchObject({ chargedTokens: -350 });
    expect(windowsOf(settled)).toEqual({
      'month-tokens': [150, undefined],
      'day-tokens': [150, 150],
    });
    await rebuiltEqualsLive(h, config, o);
  });

  for (const mode of ['estimate', 'reserve']) {
    test(`${mode}: a day budget removed mid-call keeps what the close billed it, rebuilt too`, async ({
      start,
      nc,
      redis,
      iso,
    }) => {
      const h = await start(one(mode, [month, day]));
      const id = newId();
      admissionOf(await h.client.admit(admit(id)));
      expect((await h.client.configApply({ document: one(mode, [month]) })).ok).toBe(true);
      expect(await h.client.settle(settle(id))).toMatchObject({ ok: true });
      // Added back: the day window shows what it kept (budgets keep their spend across changes).
      const config = one(mode, [month, day]);
      expect((await h.client.configApply({ document: config })).ok).toBe(true);
      const u = await h.client.usage({ tenant: 'team' });
      expect(u.ok && u.value.tenants[0]!.windows.map((w) => [w.budget, w.used, w.held])).toEqual([
        ['month-tokens', 150, 0],
        ['day-tokens', 150, 0],
      ]);
      await rebuiltEqualsLive(h, config, { start, nc, redis, iso });
    });
  }
});
