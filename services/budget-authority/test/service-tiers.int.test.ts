import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { Keys } from '../src/keys.js';
import { stateKeys } from '../src/rebuild.js';
import type { TestAuthority } from '../src/testing.js';
import { admissionOf, newId, readEvents, authorityTest as test } from './harness.js';
import { outboxesRelayed, rebuilder } from './rebuild-activity.js';

/**
 * Service tiers priced as the provider bills them (OpenAI's gpt-5: priority $2.50 / $0.25 /
 * $20 per MTok input / cached / output against the default $1.25 / $0.125 / $10, flex half
 * the default): a call is held at the tier it is asked at and billed at the tier the provider
 * reports, the tier held when it reports none.
 */
const CONFIG = {
  upstreams: [{ id: 'openai', baseUrl: 'https://api.openai.com/v1' }],
  models: [
    {
      id: 'gpt-5',
      upstream: 'openai',
      price: {
        inputPerMTok: 1.25,
        outputPerMTok: 10,
        cachedInputPerMTok: 0.125,
        serviceTiers: {
          priority: { inputPerMTok: 2.5, outputPerMTok: 20, cachedInputPerMTok: 0.25 },
          flex: { inputPerMTok: 0.625, outputPerMTok: 5, cachedInputPerMTok: 0.0625 },
        },
      },
    },
  ],
  tenants: [
    {
      id: 'fast',
      budgets: [{ window: 'day', limit: 10, unit: 'usd' }],
      useCases: [{ id: 'chat', maxTokens: 4_096, models: ['gpt-5'] }],
    },
  ],
};

const call = (serviceTier?: string) => ({
  reservationId: newId(),
  tenant: 'fast',
  keyId: null,
  useCase: 'chat',
  model: 'gpt-5',
  promptTokens: 1_000,
  maxTokens: 500,
  ...(serviceTier ? { serviceTier } : {}),
});

/** 1,000 prompt tokens (200 of them cached) and 400 output. */
const USAGE = { promptTokens: 1_000, cachedPromptTokens: 200, completionTokens: 400 };
// 800 x 2.5 + 200 x 0.25 + 400 x 20; 800 x 1.25 + 200 x 0.125 + 400 x 10; flex half of default.
const PRIORITY_COST = 10_050;
const DEFAULT_COST = 5_025;
const FLEX_COST = 2_513;

/** Settles a reservation of team fast with USAGE, the tier reported as given (none: absent). */
const settler = (h: TestAuthority) => (reservationId: string, serviceTier?: string) =>
  h.client.settle({
    reservationId,
    tenant: 'fast',
    usage: { ...USAGE, ...(serviceTier ? { serviceTier } : {}) },
  });

test('each tier is held at its price and settled at the tier the provider reports', async ({
  start,
  nc,
  iso,
}) => {
  const h = await start(CONFIG);
  const settle = settler(h);

  // Held: 1,000 x $1.25 + 500 x $10; priority twice that; flex half.
  const base = call();
  expect(admissionOf(await h.client.admit(base))).toMatchObject({ heldMicroUsd: 6_250 });
  const priority = call('priority');
  expect(admissionOf(await h.client.admit(priority))).toMatchObject({ heldMicroUsd: 12_500 });
  const flex = call('flex');
  expect(admissionOf(await h.client.admit(flex))).toMatchObject({ heldMicroUsd: 3_125 });

  expect(await settle(priority.reservationId, 'priority')).toMatchObject({
    ok: true,
    value: { status: 'settled', costMicroUsd: PRIORITY_COST, overrunMicroUsd: 0 },
  });
  expect(await settle(base.reservationId, 'default')).toMatchObject({
    ok: true,
    value: { costMicroUsd: DEFAULT_COST, overrunMicroUsd: 0 },
  });
  expect(await settle(flex.reservationId, 'flex')).toMatchObject({
    ok: true,
    value: { costMicroUsd: FLEX_COST, overrunMicroUsd: 0 },
  });

  const events = await waitFor(async () => {
    const e = await readEvents(nc, iso.names);
    return e.filter((x) => x.type === 'reservation.settled').length === 3 ? e : undefined;
  });
  const tierOf = (id: string) =>
    events.find((e) => e.type === 'reservation.settled' && e.reservationId === id);
  expect(tierOf(priority.reservationId)).toMatchObject({
    serviceTier: 'priority',
    costMicroUsd: PRIORITY_COST,
  });
  expect(tierOf(base.reservationId)).toMatchObject({ serviceTier: 'default' });
  expect(tierOf(flex.reservationId)).toMatchObject({ serviceTier: 'flex' });
  expect(
    events.find(
      (e) => e.type === 'reservation.created' && e.reservationId === priority.reservationId,
    ),
  ).toMatchObject({ serviceTier: 'priority' });
});

test('priority downgraded to default bills default; no report bills the tier held', async ({
  start,
}) => {
  const h = await start(CONFIG);
  const downgraded = call('priority');
  admissionOf(await h.client.admit(downgraded));
  const unreported = call('priority');
  admissionOf(await h.client.admit(unreported));
  // A tier the model does not price (or a name no provider uses) bills the tier held too.
  const unknown = call('priority');
  admissionOf(await h.client.admit(unknown));
  const settle = settler(h);
  expect(await settle(downgraded.reservationId, 'default')).toMatchObject({
    ok: true,
    value: { costMicroUsd: DEFAULT_COST },
  });
  expect(await settle(unreported.reservationId)).toMatchObject({
    ok: true,
    value: { costMicroUsd: PRIORITY_COST },
  });
  expect(await settle(unknown.reservationId, 'scale')).toMatchObject({
    ok: true,
    value: { costMicroUsd: PRIORITY_COST },
  });
  // Anthropic's name for the base tier is the base.
  const standard = call('priority');
  admissionOf(await h.client.admit(standard));
  expect(await settle(standard.reservationId, 'standard')).toMatchObject({
    ok: true,
    value: { costMicroUsd: DEFAULT_COST },
  });
});

test('a dearer tier than held is billed in full, the excess an overrun', async ({ start }) => {
  const h = await start(CONFIG);
  const req = call();
  expect(admissionOf(await h.client.admit(req))).toMatchObject({ heldMicroUsd: 6_250 });
  const settled = await h.client.settle({
    reservationId: req.reservationId,
    tenant: 'fast',
    usage: { ...USAGE, serviceTier: 'priority' },
  });
  expect(settled).toMatchObject({
    ok: true,
    value: { costMicroUsd: PRIORITY_COST, overrunMicroUsd: PRIORITY_COST - 6_250 },
  });
});

test('a tier the model does not price is refused, nothing held or taken', async ({ start }) => {
  // Room upstream for one call a minute (1,500 tokens of 90% of 1,700): a refused call that
  // took it would leave none.
  const h = await start({
    ...CONFIG,
    upstreams: [{ ...CONFIG.upstreams[0]!, capacity: { tokensPerMinute: 1_700 } }],
  });
  const r = await h.client.admit(call('scale'));
  expect(r).toMatchObject({ ok: false, error: { code: 'not_priced' } });
  if (!r.ok) expect(r.error.message).toContain('scale');
  // The whole budget is still there: a call at its full price fits.
  const usage = await h.client.admit(call('priority'));
  expect(admissionOf(usage).windows[0]).toMatchObject({ used: 0, held: 12_500 });
});

test('a hold admitted before service tiers existed bills the base, whatever is reported', async ({
  start,
  redis,
}) => {
  const h = await start(CONFIG);
  const old = call();
  admissionOf(await h.client.admit(old));
  const key = h.authority.ctx.keys.reservation('fast', old.reservationId);
  const fixed = (await redis.hget(key, 'r'))?.split('\u0001') ?? [];
  expect(fixed).toHaveLength(25);
  await redis.hset(key, 'r', fixed.slice(0, 23).join('\u0001'));
  const settled = await h.client.settle({
    reservationId: old.reservationId,
    tenant: 'fast',
    usage: { ...USAGE, serviceTier: 'priority' },
  });
  expect(settled).toMatchObject({ ok: true, value: { costMicroUsd: DEFAULT_COST } });
});

test('a hold rebuilt from the event stream keeps its tier: held at it, billed at the one reported', async ({
  start,
  nc,
  redis,
  iso,
}) => {
  const h = await start(CONFIG);
  const downgraded = call('priority');
  const unreported = call('priority');
  for (const req of [downgraded, unreported]) admissionOf(await h.client.admit(req));
  const keys = new Keys(iso.keyPrefix);
  await outboxesRelayed(redis, keys);
  const now = h.clock.now;
  await h.stop();
  await redis.del(...(await stateKeys(redis, keys)));
  const on = { redis, nc, names: iso.names, keys, now, config: CONFIG };
  expect(await rebuilder(on).run()).toMatchObject({ liveHolds: 2 });

  const h2 = await start(CONFIG);
  h2.clock.now = now;
  const usage = await h2.client.usage({ tenant: 'fast' });
  expect(usage.ok && usage.value.tenants[0]?.windows[0]).toMatchObject({ held: 25_000 });
  const settle = settler(h2);
  expect(await settle(downgraded.reservationId, 'default')).toMatchObject({
    ok: true,
    value: { costMicroUsd: DEFAULT_COST },
  });
  expect(await settle(unreported.reservationId)).toMatchObject({
    ok: true,
    value: { costMicroUsd: PRIORITY_COST, overrunMicroUsd: 0 },
  });
});
