import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { admissionOf, newId, readEvents, authorityTest as test } from './harness.js';

/**
 * Token categories priced as configured: a hold prices the prompt at the dearest input price
 * (here the 1-hour cache write), and settlement bills uncached input, cache reads, 5-minute and
 * 1-hour cache writes and output (reasoning included) each at its own price, in exact integer
 * pico-USD rounded up once to micro-USD.
 */
const CONFIG = {
  upstreams: [{ id: 'claude', api: 'anthropic', baseUrl: 'https://api.anthropic.com' }],
  models: [
    {
      id: 'claude-sonnet',
      upstream: 'claude',
      price: { inputPerMTok: 3, outputPerMTok: 15, cachedInputPerMTok: 0.3 },
    },
  ],
  tenants: [
    {
      id: 'coder',
      budgets: [
        { window: 'month', limit: 1_000_000, unit: 'tokens' },
        { window: 'day', limit: 10, unit: 'usd' },
      ],
      useCases: [{ id: 'agent', maxTokens: 4_096, models: ['claude-sonnet'] }],
    },
  ],
};

const call = () => ({
  reservationId: newId(),
  tenant: 'coder',
  keyId: null,
  useCase: 'agent',
  model: 'claude-sonnet',
  api: 'messages' as const,
  promptTokens: 1_000,
  maxTokens: 500,
});

test('a hold prices the prompt at the dearest input price; settlement bills each category at its own', async ({
  start,
  nc,
  iso,
}) => {
  const h = await start(CONFIG);
  const req = call();
  // 1,000 x $6 (the default 1-hour write, 2x input) + 500 x $15 per MTok = 13,500 micro-USD.
  const admitted = admissionOf(await h.client.admit(req));
  expect(admitted).toMatchObject({ heldTokens: 1_500, heldMicroUsd: 13_500 });

  const usage = {
    promptTokens: 1_000,
    cachedPromptTokens: 200,
    cacheWrite5mTokens: 300,
    cacheWrite1hTokens: 100,
    completionTokens: 300,
    reasoningTokens: 120,
  };
  const settled = await h.client.settle({
    reservationId: req.reservationId,
    tenant: 'coder',
    usage,
  });
  // 400 x 3 + 200 x 0.3 + 300 x 3.75 + 100 x 6 + 300 x 15 = 1,200 + 60 + 1,125 + 600 + 4,500.
  expect(settled).toMatchObject({
    ok: true,
    value: { status: 'settled', billedTokens: 1_300, costMicroUsd: 7_485, overrunMicroUsd: 0 },
  });

  // The dearest mix (the whole prompt written for an hour, all output) costs exactly the hold.
  const worst = call();
  admissionOf(await h.client.admit(worst));
  const dearest = await h.client.settle({
    reservationId: worst.reservationId,
    tenant: 'coder',
    usage: { promptTokens: 1_000, cacheWrite1hTokens: 1_000, completionTokens: 500 },
  });
  expect(dearest).toMatchObject({
    ok: true,
    value: { costMicroUsd: 13_500, overrunTokens: 0, overrunMicroUsd: 0 },
  });

  const events = await waitFor(async () => {
    const e = await readEvents(nc, iso.names);
    return e.filter((x) => x.type === 'reservation.settled').length === 2 ? e : undefined;
  });
  expect(events.find((e) => e.type === 'reservation.created')).toMatchObject({ api: 'messages' });
  expect(events.find((e) => e.type === 'reservation.settled')).toMatchObject({
    api: 'messages',
    ...usage,
    costMicroUsd: 7_485,
    chargedMicroUsd: 7_485,
  });
  expect(events.some((e) => e.type === 'reservation.overrun')).toBe(false);
  const u = await h.client.usage({ tenant: 'coder' });
  expect(u.ok && u.value.tenants[0]).toMatchObject({ billedMicroUsd: 7_485 + 13_500 });
});

/** lib.lua's RECORD_FIXED: the fields of a record's fixed text, in its order. */
const RECORD_FIXED = [
  ...['tenant', 'org', 'keyId', 'useCase', 'model', 'mode', 'api', 'prompt', 'priceIn'],
  ...['priceOut', 'priceCached', 'priceUn', 'priceW5', 'priceW1h', 'leaseMs', 'levels', 'holds'],
  ...['sampleN', 'expB', 'endUser'],
];

test('a hold admitted before cache-write prices existed settles at its recorded input price', async ({
  start,
  redis,
  nc,
  iso,
}) => {
  const h = await start(CONFIG);
  const { api: _api, ...old } = call();
  admissionOf(await h.client.admit(old));
  // The record as an earlier admit.lua wrote it: every field its own, priceIn the input
  // price, no api.
  const key = h.authority.ctx.keys.reservation('coder', old.reservationId);
  const fixed = (await redis.hget(key, 'r'))?.split('\u0001') ?? [];
  await redis.hset(key, Object.fromEntries(RECORD_FIXED.map((name, i) => [name, fixed[i]!])));
  await redis.hdel(key, 'r', 'priceUn', 'priceW5', 'priceW1h', 'api');
  await redis.hset(key, 'priceIn', '3000000');
  const settled = await h.client.settle({
    reservationId: old.reservationId,
    tenant: 'coder',
    usage: { promptTokens: 1_000, cacheWrite5mTokens: 400, completionTokens: 100 },
  });
  // 1,000 x 3 + 100 x 15: the writes at the input price, as before.
  expect(settled).toMatchObject({ ok: true, value: { costMicroUsd: 4_500 } });
  const events = await waitFor(async () => {
    const e = await readEvents(nc, iso.names);
    return e.some((x) => x.type === 'reservation.settled') ? e : undefined;
  });
  expect(events.find((e) => e.type === 'reservation.settled')).toMatchObject({
    api: 'chat',
    cacheWrite5mTokens: 400,
  });
});

/**
 * Audio priced as audio (OpenAI's gpt-4o-audio): a call that asks for audio output is held at
 * the audio output price, and settlement bills audio prompt and completion tokens at the audio
 * prices, the rest of the prompt and completion at the text ones.
 */
const AUDIO = {
  upstreams: [{ id: 'openai', baseUrl: 'https://api.openai.com/v1' }],
  models: [
    {
      id: 'gpt-4o-audio',
      upstream: 'openai',
      price: {
        inputPerMTok: 2.5,
        outputPerMTok: 10,
        cachedInputPerMTok: 1.25,
        audioInputPerMTok: 40,
        audioOutputPerMTok: 80,
      },
    },
  ],
  tenants: [
    {
      id: 'voice',
      budgets: [{ window: 'day', limit: 10, unit: 'usd' }],
      useCases: [{ id: 'talk', maxTokens: 4_096, models: ['gpt-4o-audio'] }],
    },
  ],
};

const audioCall = (audioOutput: boolean, audioInput = false) => ({
  reservationId: newId(),
  tenant: 'voice',
  keyId: null,
  useCase: 'talk',
  model: 'gpt-4o-audio',
  promptTokens: 1_000,
  maxTokens: 500,
  audioInput,
  audioOutput,
});

test('a call asking for audio output is held at the audio price; audio tokens settle at theirs', async ({
  start,
  nc,
  iso,
}) => {
  const h = await start(AUDIO);
  // Text only: 1,000 x $2.50 + 500 x $10 per MTok.
  expect(admissionOf(await h.client.admit(audioCall(false)))).toMatchObject({
    heldMicroUsd: 7_500,
  });
  // Audio sent: the prompt at $40; audio asked for: the output at $80; both.
  expect(admissionOf(await h.client.admit(audioCall(false, true)))).toMatchObject({
    heldMicroUsd: 45_000,
  });
  expect(admissionOf(await h.client.admit(audioCall(true, true)))).toMatchObject({
    heldMicroUsd: 80_000,
  });
  const req = audioCall(true);
  expect(admissionOf(await h.client.admit(req))).toMatchObject({ heldMicroUsd: 42_500 });
  const usage = {
    promptTokens: 1_000,
    cachedPromptTokens: 100,
    audioPromptTokens: 200,
    completionTokens: 400,
    audioCompletionTokens: 300,
  };
  const settled = await h.client.settle({
    reservationId: req.reservationId,
    tenant: 'voice',
    usage,
  });
  // 700 x 2.5 + 100 x 1.25 + 200 x 40 + 100 x 10 + 300 x 80 = 1,750 + 125 + 8,000 + 1,000 + 24,000.
  expect(settled).toMatchObject({
    ok: true,
    value: { status: 'settled', costMicroUsd: 34_875, overrunMicroUsd: 0 },
  });

  // All of it audio: exactly the hold.
  const worst = audioCall(true);
  admissionOf(await h.client.admit(worst));
  const dearest = await h.client.settle({
    reservationId: worst.reservationId,
    tenant: 'voice',
    usage: { promptTokens: 1_000, completionTokens: 500, audioCompletionTokens: 500 },
  });
  expect(dearest).toMatchObject({ ok: true, value: { costMicroUsd: 42_500, overrunMicroUsd: 0 } });

  const events = await waitFor(async () => {
    const e = await readEvents(nc, iso.names);
    return e.filter((x) => x.type === 'reservation.settled').length === 2 ? e : undefined;
  });
  expect(events.find((e) => e.type === 'reservation.settled')).toMatchObject({
    ...usage,
    costMicroUsd: 34_875,
    chargedMicroUsd: 34_875,
  });
});

test('parts that overlap or exceed their totals bill each token once, as the event says', async ({
  start,
  nc,
  iso,
}) => {
  const h = await start(AUDIO);
  const req = audioCall(false);
  admissionOf(await h.client.admit(req));
  // Cached and audio both the whole prompt: audio first, nothing left cached; no negative count.
  const settled = await h.client.settle({
    reservationId: req.reservationId,
    tenant: 'voice',
    usage: {
      promptTokens: 100,
      cachedPromptTokens: 100,
      audioPromptTokens: 100,
      completionTokens: 10,
      audioCompletionTokens: 10,
    },
  });
  // 100 x 40 + 10 x 80.
  expect(settled).toMatchObject({ ok: true, value: { costMicroUsd: 4_800 } });
  const events = await waitFor(async () => {
    const e = await readEvents(nc, iso.names);
    return e.some((x) => x.type === 'reservation.settled') ? e : undefined;
  });
  expect(events.find((e) => e.type === 'reservation.settled')).toMatchObject({
    promptTokens: 100,
    cachedPromptTokens: 0,
    audioPromptTokens: 100,
    audioCompletionTokens: 10,
    costMicroUsd: 4_800,
  });
});

test('a hold admitted before audio prices existed bills audio as text', async ({
  start,
  redis,
}) => {
  const h = await start(AUDIO);
  const old = audioCall(false);
  admissionOf(await h.client.admit(old));
  // The record's fixed text as an earlier admit.ts wrote it: its first 20 fields.
  const key = h.authority.ctx.keys.reservation('voice', old.reservationId);
  const fixed = (await redis.hget(key, 'r'))?.split('\u0001') ?? [];
  expect(fixed).toHaveLength(25);
  await redis.hset(key, 'r', fixed.slice(0, 20).join('\u0001'));
  const settled = await h.client.settle({
    reservationId: old.reservationId,
    tenant: 'voice',
    usage: {
      promptTokens: 1_000,
      audioPromptTokens: 1_000,
      completionTokens: 100,
      audioCompletionTokens: 100,
    },
  });
  // 1,000 x 2.5 + 100 x 10: the text prices, as before.
  expect(settled).toMatchObject({ ok: true, value: { costMicroUsd: 3_500 } });
});

test('a growing hold of an audio call grows at the audio output price (adaptive)', async ({
  start,
}) => {
  const tenant = AUDIO.tenants[0]!;
  const h = await start({
    ...AUDIO,
    tenants: [
      { ...tenant, mode: 'adaptive', adaptive: { percentile: 0.95, minSamples: 1, samples: 10 } },
    ],
  });
  const learnt = audioCall(false);
  admissionOf(await h.client.admit({ ...learnt, extensible: true }));
  await h.client.settle({
    reservationId: learnt.reservationId,
    tenant: 'voice',
    usage: { promptTokens: 1_000, completionTokens: 100 },
  });
  // Covers the recent 100 output tokens: 1,000 x 2.5 + 100 x 80.
  const a = admissionOf(await h.client.admit({ ...audioCall(true), extensible: true }));
  expect(a).toMatchObject({ coveredOutputTokens: 100, heldMicroUsd: 10_500 });
  const grown = await h.client.extend({
    reservationId: a.reservationId,
    tenant: 'voice',
    outputTokens: 300,
  });
  // 200 more output tokens at $80: 16,000 micro-USD.
  expect(grown).toMatchObject({
    ok: true,
    value: { status: 'extended', coveredOutputTokens: 300, heldMicroUsd: 26_500 },
  });
});
