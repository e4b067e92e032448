import { parseConfig } from '@holdfast/config';
import { createLogger } from '@holdfast/runtime';
import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { Keys } from '../src/keys.js';
import { Rebuilder, stateKeys } from '../src/rebuild.js';
import { admissionOf, authorityTest as test, BASE_CONFIG, newId, type Harness } from './harness.js';

const useCases = [{ id: 'uc', maxTokens: 1_000, models: ['gpt-4o-mini'] }];
const CONFIG = {
  ...BASE_CONFIG,
  tenants: [
    {
      id: 'acme',
      budgets: [
        { window: 'day', limit: 1_000_000 },
        { window: 'month', limit: 50, unit: 'usd' },
      ],
    },
    {
      id: 'team-r',
      parent: 'acme',
      budgets: [
        { window: 'minute', limit: 100_000 },
        { window: 'day', limit: 5, unit: 'usd' },
        { window: 'month', limit: 500_000, calendar: true },
      ],
      useCases,
    },
    { id: 'team-e', mode: 'estimate', budgets: [{ window: 'day', limit: 100_000 }], useCases },
    {
      id: 'team-a',
      mode: 'adaptive',
      adaptive: { percentile: 0.95, minSamples: 3, samples: 50 },
      budgets: [{ window: 'day', limit: 100_000 }],
      useCases,
    },
    {
      id: 'team-k',
      parent: 'acme',
      budgets: [{ window: 'day', limit: 100_000 }],
      endUserBudgets: [
        { window: 'day', limit: 50_000 },
        { window: 'month', limit: 1, unit: 'usd', calendar: true },
      ],
      useCases,
      keys: [{ id: 'kk', sha256: 'a'.repeat(64), budgets: [{ window: 'minute', limit: 90_000 }] }],
    },
  ],
};

const call = (tenant: string, prompt: number, extensible = false) => ({
  reservationId: newId(),
  tenant,
  keyId: null,
  useCase: 'uc',
  model: 'gpt-4o-mini',
  promptTokens: prompt,
  maxTokens: 500,
  extensible,
});

async function activity(h: Harness): Promise<string[]> {
  const live: string[] = [];
  for (let i = 0; i < 10; i++) {
    const a = admissionOf(await h.client.admit(call('team-r', 100 + i)));
    if (i < 6)
      await h.client.settle({
        reservationId: a.reservationId,
        tenant: 'team-r',
        usage: { promptTokens: 100 + i, completionTokens: 50 * i, cachedPromptTokens: i },
      });
    else if (i < 8)
      await h.client.release({
        reservationId: a.reservationId,
        tenant: 'team-r',
        reason: 'upstream_error',
      });
    else live.push(a.reservationId);
    h.clock.advance(7_000);
  }
  for (let i = 0; i < 6; i++) {
    const a = admissionOf(await h.client.admit(call('team-e', 200)));
    if (i < 5)
      await h.client.settle({
        reservationId: a.reservationId,
        tenant: 'team-e',
        usage: { promptTokens: 190, completionTokens: 30 },
      });
    else
      await h.client.release({
        reservationId: a.reservationId,
        tenant: 'team-e',
        reason: 'not_forwarded',
      });
  }
  await h.client.suspend({ tenant: 'team-e', reason: 'test', by: 'admin' });
  for (let i = 0; i < 3; i++) {
    const a = admissionOf(await h.client.admit(call('team-a', 50, true)));
    await h.client.settle({
      reservationId: a.reservationId,
      tenant: 'team-a',
      usage: { promptTokens: 50, completionTokens: 100 },
    });
  }
  // A key's own budget and end users': closes that name them and closes that do not.
  for (let i = 0; i < 6; i++) {
    const a = admissionOf(
      await h.client.admit({ ...call('team-k', 120), keyId: 'kk', endUser: i % 2 ? 'x' : 'y' }),
    );
    const who = i % 3 === 0 ? { keyId: 'kk', endUser: i % 2 ? 'x' : 'y' } : {};
    if (i < 5)
      await h.client.settle({
        reservationId: a.reservationId,
        tenant: 'team-k',
        ...who,
        usage: { promptTokens: 120, completionTokens: 40 * i },
      });
    else live.push(a.reservationId);
    h.clock.advance(1_000);
  }
  const grown = admissionOf(await h.client.admit(call('team-a', 50, true)));
  expect(grown.coveredOutputTokens).toBe(100);
  await h.client.extend({
    reservationId: grown.reservationId,
    tenant: 'team-a',
    outputTokens: 300,
  });
  live.push(grown.reservationId);
  return live;
}

test('the budget state rebuilt from the event stream equals the state that wrote it', async ({
  start,
  nc,
  redis,
  iso,
}) => {
  const h = await start(CONFIG);
  const live = await activity(h);
  const keys = new Keys(iso.keyPrefix);
  await waitFor(
    async () => {
      const outboxes = (await stateKeys(redis, keys)).filter((k) => k.endsWith(':outbox'));
      return (await Promise.all(outboxes.map((k) => redis.xlen(k)))).every((n) => n === 0);
    },
    { what: 'outboxes relayed' },
  );
  const before = await h.client.usage({});
  expect(before.ok).toBe(true);
  const now = h.clock.now;
  await h.stop();

  // Lose every budget key (the config stays), then rebuild from the stream.
  const lost = await stateKeys(redis, keys);
  expect(lost.length).toBeGreaterThan(10);
  await redis.del(...lost);
  const parsed = parseConfig(CONFIG);
  if (!parsed.ok) throw new Error(parsed.error.errors.join());
  const rebuilder = new Rebuilder({
    redis,
    nc,
    names: iso.names,
    keys,
    config: parsed.value,
    logger: createLogger({ name: 'rebuild', level: 'silent' }),
    now,
  });
  const summary = await rebuilder.run();
  expect(summary).toMatchObject({ liveHolds: 4 });
  // A second rebuild refuses to mix with existing state.
  await expect(
    new Rebuilder({
      redis,
      nc,
      names: iso.names,
      keys,
      config: parsed.value,
      logger: createLogger({ name: 'rebuild', level: 'silent' }),
      now,
    }).run(),
  ).rejects.toThrow(/already holds/);

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
