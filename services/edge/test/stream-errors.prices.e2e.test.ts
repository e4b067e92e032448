import { modelPrices, type PriceConfig } from '@holdfast/config';
import type { HoldfastEvent } from '@holdfast/events';
import type { RequestRecord } from '@holdfast/mock-upstream';
import { expect } from 'vitest';
import { providerBooks } from './books.js';
import { edgeTest as test, nothingHeldAnywhere, type Stack, type TestConfig } from './harness.js';
import { sha256Hex } from '../src/index.js';
import { chatText, words } from './surfaces.js';

/**
 * A call retried after an error inside its stream, on a dearer price than the base: a
 * priority-tier call, a call whose prompt is under the long-context line while the two
 * attempts' prompts together are above it, and one whose prompt is above it (held long). The hold grows by the failed attempt's bill before
 * the retry; the settle bills both attempts. A usd window with room for exactly the hold and
 * the failed attempt as the provider bills it (each request at its own tier and on its own
 * side of the line) must hold: no overrun, no window past its limit, the books the provider's.
 * Prices in whole micro-USD a token, so one rounding for both attempts equals the provider's
 * one per request.
 */
const LINE = 1_000;
const SHORT: PriceConfig = { inputPerMTok: 1, outputPerMTok: 5 };
const LONG = { aboveInputTokens: LINE, inputPerMTok: 2, outputPerMTok: 8 };
const PRIORITY: PriceConfig = { inputPerMTok: 2, outputPerMTok: 10 };
const LONG_MODEL = 'gpt-long-line';
const TIER_MODEL = 'gpt-priority';
const MAX_TOKENS = 100;

type Lane = { tenant: string; key: string };
const lane = (name: string): Lane => ({ tenant: name, key: `sk-hf-${name}-1` });
const LANES = {
  longProbe: lane('long-probe'),
  longTight: lane('long-tight'),
  overProbe: lane('over-probe'),
  overTight: lane('over-tight'),
  tierProbe: lane('tier-probe'),
  tierTight: lane('tier-tight'),
};

function withLanes(limits: () => Record<string, number>) {
  return (c: TestConfig): void => {
    c.models.push({
      id: LONG_MODEL,
      upstream: 'default',
      tokenizer: 'o200k_base',
      price: { ...SHORT, longContext: LONG },
    });
    c.models.push({
      id: TIER_MODEL,
      upstream: 'default',
      tokenizer: 'o200k_base',
      price: { ...SHORT, serviceTiers: { priority: PRIORITY } },
    });
    for (const t of Object.values(LANES)) {
      c.tenants.push({
        id: t.tenant,
        mode: 'reserve',
        budgets: [{ window: 'day', limit: limits()[t.tenant] ?? 5, unit: 'usd' }],
        useCases: [{ id: 'chat', maxTokens: 512, models: [LONG_MODEL, TIER_MODEL] }],
        keys: [{ id: `${t.tenant}-1`, sha256: sha256Hex(t.key), defaultUseCase: 'chat' }],
      });
    }
  };
}

/** The provider's prices for one request: its tier's, long above the line. */
function providerPrices(r: RequestRecord) {
  if (r.serviceTier === 'priority') return modelPrices(PRIORITY, 'openai');
  return modelPrices(r.longContext ? LONG : SHORT, 'openai');
}

// About 600 prompt tokens: under the line, two of them above it.
const longBody = {
  model: LONG_MODEL,
  max_tokens: MAX_TOKENS,
  stream: true,
  messages: [{ role: 'user', content: words(600) }],
};
// About 1,200: each request above the line, held and billed long.
const overBody = { ...longBody, messages: [{ role: 'user', content: words(1_200) }] };
const tierBody = {
  model: TIER_MODEL,
  max_tokens: MAX_TOKENS,
  stream: true,
  service_tier: 'priority',
  messages: [{ role: 'user', content: words(300) }],
};

const of = (events: HoldfastEvent[], id: string | null | undefined) =>
  events.filter((e) => 'reservationId' in e && e.reservationId === id);

/** One call whose first attempt fails in its stream and whose retry answers, checked. */
async function failedThenAnswered(s: Stack, t: Lane, body: object) {
  const before = s.upstream.stats().recent.length;
  s.upstream.failNext({ status: 'error', count: 1 });
  const res = await chatText(s.edge.url, t.key, body);
  expect(res.status).toBe(200);
  expect(res.text).toContain('[DONE]');
  expect(res.text).not.toContain('"error"');
  const usage = await s.settled(t.tenant);
  const records = s.upstream.stats().recent.slice(before);
  expect(records.map((r) => r.outcome)).toEqual(['error_stream', 'completed']);
  const events = of(await s.events(), records[0]!.clientRequestId);
  const created = events.find((e) => e.type === 'reservation.created');
  const grown = events.filter((e) => e.type === 'reservation.extended');
  expect(grown).toHaveLength(1);
  // No overrun, no window past its limit, the books the provider's bill for both requests.
  expect(events.filter((e) => e.type === 'reservation.overrun')).toEqual([]);
  expect(usage.overruns.count).toBe(0);
  for (const w of usage.windows) expect(w.used).toBeLessThanOrEqual(w.limit);
  expect(usage.billedMicroUsd).toBe(providerBooks(records, providerPrices).microUsd);
  const held = created?.type === 'reservation.created' ? created.heldMicroUsd : NaN;
  const added = grown[0]?.type === 'reservation.extended' ? grown[0].addedMicroUsd : NaN;
  return { records, held, added, usage };
}

test('an in-stream error retried on a priority hold, on a prompt under the long-context line and on one above it: the grown hold covers the settle, no window past a limit that fits only the right prices, the books the provider billed', async ({
  stack,
  redis,
  iso,
}) => {
  const limits: Record<string, number> = {};
  const s = await stack({
    patch: withLanes(() => limits),
    behaviour: {
      completion: { mode: 'fraction', fraction: 1 },
      longContextAboveTokens: LINE,
    },
  });

  // Probes (room to spare): what the hold and its growth are at the right prices.
  const long = await failedThenAnswered(s, LANES.longProbe, longBody);
  const [lf, la] = long.records;
  // The premise: each request under the line, the two together above it.
  expect(lf!.promptTokens).toBeLessThanOrEqual(LINE);
  expect(lf!.promptTokens + la!.promptTokens).toBeGreaterThan(LINE);
  expect(long.records.map((r) => r.longContext)).toEqual([false, false]);
  expect(long.added).toBe(lf!.promptTokens * 1);

  const over = await failedThenAnswered(s, LANES.overProbe, overBody);
  expect(over.records.map((r) => r.longContext)).toEqual([true, true]);
  expect(over.added).toBe(over.records[0]!.promptTokens * 2);

  const tier = await failedThenAnswered(s, LANES.tierProbe, tierBody);
  expect(tier.records.map((r) => r.serviceTier)).toEqual(['priority', 'priority']);
  expect(tier.added).toBe(tier.records[0]!.promptTokens * 2);

  // A window with room for exactly the hold and the failed attempt at the right prices.
  limits[LANES.longTight.tenant] = (long.held + long.added) / 1_000_000;
  limits[LANES.overTight.tenant] = (over.held + over.added) / 1_000_000;
  limits[LANES.tierTight.tenant] = (tier.held + tier.added) / 1_000_000;
  await s.applyConfig();
  const longTight = await failedThenAnswered(s, LANES.longTight, longBody);
  expect(longTight.usage.windows.map((w) => w.limit)).toEqual([long.held + long.added]);
  const overTight = await failedThenAnswered(s, LANES.overTight, overBody);
  expect(overTight.usage.windows.map((w) => w.limit)).toEqual([over.held + over.added]);
  const tierTight = await failedThenAnswered(s, LANES.tierTight, tierBody);
  expect(tierTight.usage.windows.map((w) => w.limit)).toEqual([tier.held + tier.added]);
  await nothingHeldAnywhere(redis, iso.keyPrefix);
});
