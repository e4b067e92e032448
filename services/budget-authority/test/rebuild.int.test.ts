import { expect } from 'vitest';
import { Keys } from '../src/keys.js';
import { stateKeys } from '../src/rebuild.js';
import { waitFor } from '@holdfast/testkit';
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
