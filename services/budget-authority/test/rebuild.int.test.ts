import { expect } from 'vitest';
import { Keys } from '../src/keys.js';
import { stateKeys } from '../src/rebuild.js';
import { admissionOf, authorityTest as test } from './harness.js';
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
