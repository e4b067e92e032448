import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import type { TestAuthority } from '../src/testing.js';
import { admissionOf, newId, readEvents, authorityTest as test } from './harness.js';

/**
 * Long-context prices (OpenAI's GPT-5.4 doubles input and adds half to output above its line;
 * the line is 1,000 tokens here so prompts stay small): a call whose admitted prompt is above
 * its tier's line is held at that tier's long price, and settled at the billed tier's long
 * price when the provider's input is above its line, whatever it was held at.
 */
const CONFIG = {
  upstreams: [
    { id: 'openai', baseUrl: 'https://api.openai.com/v1' },
    { id: 'claude', api: 'anthropic', baseUrl: 'https://api.anthropic.com' },
  ],
  models: [
    {
      id: 'gpt-5.4',
      upstream: 'openai',
      price: {
        inputPerMTok: 2.5,
        outputPerMTok: 15,
        longContext: { aboveInputTokens: 1_000, inputPerMTok: 5, outputPerMTok: 22.5 },
        serviceTiers: {
          priority: {
            inputPerMTok: 5,
            outputPerMTok: 30,
            longContext: { aboveInputTokens: 1_000, inputPerMTok: 10, outputPerMTok: 45 },
          },
        },
      },
    },
    { id: 'gpt-short', upstream: 'openai', price: { inputPerMTok: 2.5, outputPerMTok: 15 } },
    {
      id: 'claude',
      upstream: 'claude',
      price: {
        inputPerMTok: 3,
        outputPerMTok: 15,
        cachedInputPerMTok: 0.3,
        longContext: {
          aboveInputTokens: 1_000,
          inputPerMTok: 6,
          outputPerMTok: 22.5,
          cachedInputPerMTok: 0.6,
        },
      },
    },
  ],
  tenants: [
    {
      id: 'fast',
      budgets: [{ window: 'day', limit: 10, unit: 'usd' }],
      useCases: [{ id: 'chat', maxTokens: 4_096, models: ['gpt-5.4', 'gpt-short', 'claude'] }],
    },
  ],
};

const call = (promptTokens: number, extra: { serviceTier?: string; model?: string } = {}) => ({
  reservationId: newId(),
  tenant: 'fast',
  keyId: null,
  useCase: 'chat',
  model: 'gpt-5.4',
  promptTokens,
  maxTokens: 500,
  ...extra,
});

const settle = (
  h: TestAuthority,
  reservationId: string,
  promptTokens: number,
  serviceTier?: string,
) =>
  h.client.settle({
    reservationId,
    tenant: 'fast',
    usage: {
      promptTokens,
      cachedPromptTokens: 0,
      completionTokens: 400,
      ...(serviceTier ? { serviceTier } : {}),
    },
  });

test('above the line held and billed long, at or under it short; longContext on the events', async ({
  start,
  nc,
  iso,
}) => {
  const h = await start(CONFIG);
  // 1,200 x $5 + 500 x $22.50 against 1,000 x $2.50 + 500 x $15.
  const long = call(1_200);
  expect(admissionOf(await h.client.admit(long))).toMatchObject({ heldMicroUsd: 17_250 });
  const atLine = call(1_000);
  expect(admissionOf(await h.client.admit(atLine))).toMatchObject({ heldMicroUsd: 10_000 });
  // Held long (an upper bound above the line) but the provider counts it under: billed short.
  const overCounted = call(1_200);
  admissionOf(await h.client.admit(overCounted));

  // 1,200 x $5 + 400 x $22.50; 1,000 x $2.50 + 400 x $15; 900 x $2.50 + 400 x $15.
  expect(await settle(h, long.reservationId, 1_200)).toMatchObject({
    ok: true,
    value: { costMicroUsd: 15_000, overrunMicroUsd: 0 },
  });
  expect(await settle(h, atLine.reservationId, 1_000)).toMatchObject({
    ok: true,
    value: { costMicroUsd: 8_500, overrunMicroUsd: 0 },
  });
  expect(await settle(h, overCounted.reservationId, 900)).toMatchObject({
    ok: true,
    value: { costMicroUsd: 8_250 },
  });

  const events = await waitFor(async () => {
    const e = await readEvents(nc, iso.names);
    return e.filter((x) => x.type === 'reservation.settled').length === 3 ? e : undefined;
  });
  const of = (type: string, id: string) =>
    events.find((e) => e.type === type && 'reservationId' in e && e.reservationId === id) as
      { longContext?: boolean } | undefined;
  expect(of('reservation.created', long.reservationId)?.longContext).toBe(true);
  expect(of('reservation.settled', long.reservationId)?.longContext).toBe(true);
  expect(of('reservation.created', atLine.reservationId)).not.toHaveProperty('longContext');
  expect(of('reservation.settled', atLine.reservationId)).not.toHaveProperty('longContext');
  expect(of('reservation.created', overCounted.reservationId)?.longContext).toBe(true);
  expect(of('reservation.settled', overCounted.reservationId)).not.toHaveProperty('longContext');
});

test('held short, billed long in full: the excess an overrun', async ({ start }) => {
  const h = await start(CONFIG);
  // The edge saw 900 tokens (an upstream-state allowance too small); the provider bills 1,500.
  const req = call(900);
  expect(admissionOf(await h.client.admit(req))).toMatchObject({ heldMicroUsd: 9_750 });
  // 1,500 x $5 + 400 x $22.50.
  expect(await settle(h, req.reservationId, 1_500)).toMatchObject({
    ok: true,
    value: { costMicroUsd: 16_500, overrunMicroUsd: 16_500 - 9_750 },
  });
});

test("each tier at its own long price; a downgrade bills the billed tier's", async ({ start }) => {
  const h = await start(CONFIG);
  // 1,200 x $10 + 500 x $45.
  const priority = call(1_200, { serviceTier: 'priority' });
  expect(admissionOf(await h.client.admit(priority))).toMatchObject({ heldMicroUsd: 34_500 });
  const downgraded = call(1_200, { serviceTier: 'priority' });
  admissionOf(await h.client.admit(downgraded));
  // 1,200 x $10 + 400 x $45; the default tier's long price: 1,200 x $5 + 400 x $22.50.
  expect(await settle(h, priority.reservationId, 1_200, 'priority')).toMatchObject({
    ok: true,
    value: { costMicroUsd: 30_000 },
  });
  expect(await settle(h, downgraded.reservationId, 1_200, 'default')).toMatchObject({
    ok: true,
    value: { costMicroUsd: 15_000 },
  });
});

test('a model without longContext: held and billed at its price at any size', async ({
  start,
  nc,
  iso,
}) => {
  const h = await start(CONFIG);
  const req = call(1_200, { model: 'gpt-short' });
  // 1,200 x $2.50 + 500 x $15; 1,200 x $2.50 + 400 x $15.
  expect(admissionOf(await h.client.admit(req))).toMatchObject({ heldMicroUsd: 10_500 });
  expect(await settle(h, req.reservationId, 1_200)).toMatchObject({
    ok: true,
    value: { costMicroUsd: 9_000 },
  });
  const events = await waitFor(async () => {
    const e = await readEvents(nc, iso.names);
    return e.some((x) => x.type === 'reservation.settled') ? e : undefined;
  });
  for (const e of events) expect(e).not.toHaveProperty('longContext');
});

test('a hold admitted before long-context prices bills its tier as before, at any size', async ({
  start,
  redis,
}) => {
  const h = await start(CONFIG);
  const old = call(900);
  admissionOf(await h.client.admit(old));
  const key = h.authority.ctx.keys.reservation('fast', old.reservationId);
  const fixed = (await redis.hget(key, 'r'))?.split('\u0001') ?? [];
  expect(fixed).toHaveLength(26);
  // The record as admitted before this change: 25 fields, no long prices.
  await redis.hset(key, 'r', fixed.slice(0, 25).join('\u0001'));
  // 1,500 x $2.50 + 400 x $15.
  expect(await settle(h, old.reservationId, 1_500)).toMatchObject({
    ok: true,
    value: { costMicroUsd: 9_750 },
  });
});

test('Anthropic: cache reads and writes count toward the line, each billed at its long price', async ({
  start,
}) => {
  const h = await start(CONFIG);
  // The edge saw 100 tokens (the rest is a cached prefix it counts as prompt all the same).
  const req = call(1_100, { model: 'claude' });
  admissionOf(await h.client.admit(req));
  // input_tokens 100 + cache_read 800 + cache_creation 200 = 1,100, above 1,000: all long.
  // 100 x $6 + 800 x $0.60 + 200 x $7.50 (1.25 x $6) + 400 x $22.50.
  expect(
    await h.client.settle({
      reservationId: req.reservationId,
      tenant: 'fast',
      usage: {
        promptTokens: 1_100,
        cachedPromptTokens: 800,
        cacheWrite5mTokens: 200,
        completionTokens: 400,
      },
    }),
  ).toMatchObject({ ok: true, value: { costMicroUsd: 11_580, overrunMicroUsd: 0 } });
});
