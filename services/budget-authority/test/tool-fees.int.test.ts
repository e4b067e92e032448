import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import type { TestAuthority } from '../src/testing.js';
import { admissionOf, newId, readEvents, authorityTest as test } from './harness.js';
import { rebuiltEqualsLive } from './rebuild-activity.js';

/**
 * Provider-run tools billed per use (Anthropic's web search, $10 per 1,000; OpenAI's file
 * search, $2.50 per 1,000): a call is held its bound on each tool's uses at the fee on top of
 * its tokens, and billed the uses the provider reports.
 */
const CONFIG = {
  upstreams: [{ id: 'claude', api: 'anthropic', baseUrl: 'https://api.anthropic.com' }],
  models: [
    {
      id: 'claude-sonnet',
      upstream: 'claude',
      price: {
        inputPerMTok: 3,
        outputPerMTok: 15,
        toolUses: { web_search: 10, file_search: 2.5 },
      },
    },
  ],
  tenants: [
    {
      id: 'fast',
      budgets: [{ window: 'day', limit: 1, unit: 'usd' }],
      useCases: [{ id: 'chat', maxTokens: 4_096, models: ['claude-sonnet'] }],
    },
  ],
};

const call = (toolUses?: Record<string, number>) => ({
  reservationId: newId(),
  tenant: 'fast',
  keyId: null,
  useCase: 'chat',
  model: 'claude-sonnet',
  promptTokens: 1_000,
  maxTokens: 500,
  ...(toolUses ? { toolUses } : {}),
});

// 1,000 x $6 (the dearest input: a 1-hour cache write) + 500 x $15 per MTok.
const TOKENS_HELD = 13_500;
/** 1,000 prompt tokens and 400 output: 3,000 + 6,000. */
const USAGE = { promptTokens: 1_000, completionTokens: 400 };
const TOKENS_COST = 9_000;

const settler = (h: TestAuthority) => (reservationId: string, toolUses?: Record<string, number>) =>
  h.client.settle({
    reservationId,
    tenant: 'fast',
    model: 'claude-sonnet',
    usage: { ...USAGE, ...(toolUses ? { toolUses } : {}) },
  });

test('a bound on tool uses is held at its fee and the uses reported are billed', async ({
  start,
  nc,
  iso,
}) => {
  const h = await start(CONFIG);
  const settle = settler(h);

  // 5 searches at $0.01 and 3 file searches at $0.0025 on top of the tokens.
  const both = call({ web_search: 5, file_search: 3 });
  expect(admissionOf(await h.client.admit(both))).toMatchObject({
    heldTokens: 1_500,
    heldMicroUsd: TOKENS_HELD + 50_000 + 7_500,
  });
  const plain = call();
  expect(admissionOf(await h.client.admit(plain))).toMatchObject({ heldMicroUsd: TOKENS_HELD });

  expect(await settle(both.reservationId, { web_search: 2, file_search: 1 })).toMatchObject({
    ok: true,
    value: { status: 'settled', costMicroUsd: TOKENS_COST + 20_000 + 2_500, overrunMicroUsd: 0 },
  });
  expect(await settle(plain.reservationId)).toMatchObject({
    ok: true,
    value: { costMicroUsd: TOKENS_COST },
  });

  const events = await waitFor(async () => {
    const e = await readEvents(nc, iso.names);
    return e.filter((x) => x.type === 'reservation.settled').length === 2 ? e : undefined;
  });
  const settled = (id: string) =>
    events.find((e) => e.type === 'reservation.settled' && e.reservationId === id);
  expect(settled(both.reservationId)).toMatchObject({
    toolUses: 3,
    toolFeeMicroUsd: 22_500,
    costMicroUsd: TOKENS_COST + 22_500,
    heldMicroUsd: TOKENS_HELD + 57_500,
  });
  expect(settled(plain.reservationId)).not.toHaveProperty('toolUses');
  expect(settled(plain.reservationId)).not.toHaveProperty('toolFeeMicroUsd');
});

test('images (Responses image_generation) are held at the bound x the image fee and billed per image', async ({
  start,
}) => {
  const model = CONFIG.models[0]!;
  const h = await start({
    ...CONFIG,
    models: [{ ...model, price: { ...model.price, toolUses: { image_generation: 170 } } }],
  });
  // 2 images at $0.17 held; 1 rendered and billed.
  const images = call({ image_generation: 2 });
  expect(admissionOf(await h.client.admit(images))).toMatchObject({
    heldMicroUsd: TOKENS_HELD + 340_000,
  });
  expect(await settler(h)(images.reservationId, { image_generation: 1 })).toMatchObject({
    ok: true,
    value: { status: 'settled', costMicroUsd: TOKENS_COST + 170_000, overrunMicroUsd: 0 },
  });
});

test('more uses than held are billed in full and recorded as an overrun', async ({
  start,
  nc,
  iso,
}) => {
  const h = await start(CONFIG);
  const held = call({ web_search: 2 });
  admissionOf(await h.client.admit(held));
  const r = await settler(h)(held.reservationId, { web_search: 7 });
  // Held 13,500 + 20,000; billed 9,000 + 70,000.
  expect(r).toMatchObject({
    ok: true,
    value: { costMicroUsd: 79_000, overrunMicroUsd: 79_000 - 33_500 },
  });
  const events = await waitFor(async () => {
    const e = await readEvents(nc, iso.names);
    return e.some((x) => x.type === 'reservation.overrun') ? e : undefined;
  });
  expect(events.find((e) => e.type === 'reservation.overrun')).toMatchObject({
    costMicroUsd: 79_000,
    overrunMicroUsd: 45_500,
  });
});

test('the tool fee counts against a usd budget at admission', async ({ start }) => {
  const h = await start({
    ...CONFIG,
    tenants: [{ ...CONFIG.tenants[0]!, budgets: [{ window: 'day', limit: 0.1, unit: 'usd' }] }],
  });
  // 13,500 + 9 x 10,000 = 103,500 > 100,000: refused, though its tokens alone fit.
  expect(admissionOf(await h.client.admit(call({ web_search: 8 })))).toMatchObject({
    heldMicroUsd: 93_500,
  });
  const r = await h.client.admit(call({ web_search: 1 }));
  expect(r).toMatchObject({ ok: true, value: { admitted: false, code: 'budget_exceeded' } });
});

test('shrink to fit leaves room for the tool fees first', async ({ start }) => {
  const h = await start({
    ...CONFIG,
    tenants: [
      {
        ...CONFIG.tenants[0]!,
        shrinkToFit: { minOutputTokens: 10 },
        budgets: [{ window: 'day', limit: 0.1, unit: 'usd' }],
      },
    ],
  });
  // 8 searches (80,000) and 1,000 prompt tokens at $6 (6,000) leave 14,000 for output at $15:
  // 933 tokens of the 4,000 asked.
  const r = admissionOf(await h.client.admit({ ...call({ web_search: 8 }), maxTokens: 4_000 }));
  expect(r).toMatchObject({ shrunk: true, maxTokens: 933, heldMicroUsd: 6_000 + 13_995 + 80_000 });
});

test('a tool the model does not price is not_priced, and nothing is held', async ({ start }) => {
  const h = await start(CONFIG);
  const r = await h.client.admit(call({ code_interpreter: 1 }));
  expect(r).toMatchObject({ ok: false, error: { code: 'not_priced' } });
  if (!r.ok) expect(r.error.message).toContain('price.toolUses.code_interpreter');
  const image = await h.client.admit(call({ image_generation: 1 }));
  expect(image).toMatchObject({ ok: false, error: { code: 'not_priced' } });
  if (!image.ok) expect(image.error.message).toContain('price.toolUses.image_generation');
  const next = await h.client.admit(call());
  expect(admissionOf(next).windows[0]).toMatchObject({ used: 0, held: TOKENS_HELD });
});

test('bad tool bounds and reported uses are refused at the boundary', async ({ start }) => {
  const h = await start(CONFIG);
  for (const toolUses of [
    { web_search: 0 },
    { web_search: -1 },
    { web_search: 1.5 },
    { web_search: 1_001 },
    { web_search: '3' },
    { computer_use: 1 },
  ]) {
    const r = await h.client.admit(call(toolUses as unknown as Record<string, number>));
    expect(r, JSON.stringify(toolUses)).toMatchObject({
      ok: false,
      error: { code: 'invalid_request' },
    });
  }
  const held = call({ web_search: 1 });
  admissionOf(await h.client.admit(held));
  const bad = await settler(h)(held.reservationId, { web_search: -2 });
  expect(bad).toMatchObject({ ok: false, error: { code: 'invalid_request' } });
  expect(await settler(h)(held.reservationId, { web_search: 1 })).toMatchObject({
    ok: true,
    value: { costMicroUsd: TOKENS_COST + 10_000 },
  });
});

test('a call admitted in post mode is held its tool fees too once its tenant switches to reserve, rebuilt alike', async ({
  start,
  nc,
  redis,
  iso,
}) => {
  const post = { ...CONFIG, tenants: [{ ...CONFIG.tenants[0]!, mode: 'post' }] };
  const h = await start(post);
  const both = call({ web_search: 5, file_search: 3 });
  expect(admissionOf(await h.client.admit(both))).toMatchObject({ heldMicroUsd: 0 });
  expect((await h.client.configApply({ document: CONFIG })).ok).toBe(true);
  // The next admission holds the post call its worst case: its tokens and its tool fees.
  admissionOf(await h.client.admit(call()));
  const u = await h.client.usage({ tenant: 'fast' });
  expect(u.ok && u.value.tenants[0]!.windows[0]!.held).toBe(TOKENS_HELD + 57_500 + TOKENS_HELD);

  await rebuiltEqualsLive(h, CONFIG, { redis, nc, iso });
});

/**
 * A call is billed its tool uses at the fees it was admitted with (the record's `tf`), which
 * its hold covered. Rebuilt from the events, its record had no `tf`, so its settle billed the
 * model's fees of the moment: a fee raised while it ran billed past its hold, an overrun of the
 * budget the live authority never made.
 */
test('a rebuilt call is billed its tool uses at the fees it was admitted with, as live', async ({
  start,
  nc,
  redis,
  iso,
}) => {
  // Web search at $25 per 1,000 from while the call runs.
  const model = CONFIG.models[0]!;
  const dearer = {
    ...CONFIG,
    models: [
      { ...model, price: { ...model.price, toolUses: { web_search: 25, file_search: 2.5 } } },
    ],
  };
  const h = await start(CONFIG);
  const searching = call({ web_search: 2 });
  expect(admissionOf(await h.client.admit(searching))).toMatchObject({
    heldMicroUsd: TOKENS_HELD + 20_000,
  });
  expect((await h.client.configApply({ document: dearer })).ok).toBe(true);
  await rebuiltEqualsLive(h, dearer, { redis, nc, iso });
  const h2 = await start(dearer);
  h2.clock.now = h.clock.now;
  expect(await settler(h2)(searching.reservationId, { web_search: 2 })).toMatchObject({
    ok: true,
    value: { status: 'settled', costMicroUsd: TOKENS_COST + 20_000, overrunMicroUsd: 0 },
  });
});
