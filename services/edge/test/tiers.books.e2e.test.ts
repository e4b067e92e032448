import { modelPrices, type ModelPrices, type PriceConfig } from '@holdfast/config';
import type { RequestRecord } from '@holdfast/mock-upstream';
import { expect } from 'vitest';
import { expectBooksHold, providerBooks, withAggregator } from './books.js';
import { edgeTest as test, KEYS, type Stack, type TestConfig } from './harness.js';
import { sha256Hex } from '../src/index.js';
import { anthropic, CLAUDE, withClaude } from './surfaces.js';
import { chatCall, digestMessages, runQueue } from './workload.js';
import { qualified, sql } from '@holdfast/billing-aggregator';

/**
 * Service tiers priced as the provider bills them, end to end (edge, authority, Redis, NATS,
 * aggregator, ClickHouse, the mock as the provider): a team with a $0.10 day budget calls a
 * model priced like OpenAI's gpt-5 (default $1.25 / $0.125 / $10, priority $2.50 / $0.25 /
 * $20 per MTok input / cached / output) asking `service_tier: "priority"`, 12 at a time, half
 * streamed, until the budget refuses; the provider downgrades a quarter of them to `default`.
 * The provider's bill at each call's tier never passes the budget, and the ledger, ClickHouse
 * and the provider agree to the micro-dollar, tier by tier.
 */
const TEAM = 'fast-lane';
const KEY = 'sk-hf-fast-lane-1';
const MODEL = 'gpt-5';
const BUDGET_USD = 0.1;
const DEFAULT = { inputPerMTok: 1.25, outputPerMTok: 10, cachedInputPerMTok: 0.125 };
const PRIORITY = { inputPerMTok: 2.5, outputPerMTok: 20, cachedInputPerMTok: 0.25 };
const PRICE: PriceConfig & { serviceTiers: { priority: PriceConfig } } = {
  ...DEFAULT,
  serviceTiers: { priority: PRIORITY },
};
const behaviour = {
  firstTokenLatencyMs: 20,
  completion: { mode: 'uniform' as const, min: 200, max: 700 },
  downgradePriority: 0.25,
};

function withFastLane(c: TestConfig): void {
  c.models.push({ id: MODEL, upstream: 'default', tokenizer: 'o200k_base', price: PRICE });
  c.tenants.push({
    id: TEAM,
    mode: 'reserve',
    budgets: [{ window: 'day', limit: BUDGET_USD, unit: 'usd' }],
    useCases: [{ id: 'chat', maxTokens: 512, models: [MODEL] }],
    keys: [{ id: 'fast-1', sha256: sha256Hex(KEY), defaultUseCase: 'chat' }],
  });
}

/** The provider's prices for a call: those of the tier it reports serving it at. */
function atTier(
  price: PriceConfig & { serviceTiers: { priority: PriceConfig } },
  api: 'openai' | 'anthropic',
) {
  const base = modelPrices(price, api);
  const priority = modelPrices(price.serviceTiers.priority, api);
  return (r: RequestRecord): ModelPrices => (r.serviceTier === 'priority' ? priority : base);
}

function ask(s: Stack, i: number): Promise<unknown> {
  const body = {
    model: MODEL,
    messages: digestMessages(i),
    service_tier: 'priority' as const,
    max_tokens: 512,
  };
  return chatCall(s.openai(KEY), body, i % 2 === 1);
}

test('a usd budget holds for priority calls: the provider at its tier prices never bills over it, and the books agree', async ({
  stack,
  natsUrl,
  clickhouseUrl,
  clickhouse,
  iso,
}) => {
  const s = await stack({ behaviour, patch: withFastLane });
  await withAggregator({ natsUrl, clickhouseUrl, clickhouse, iso }, async (ch) => {
    const run = await runQueue(60, 12, (i) => ask(s, i));
    const ledger = await s.settled(TEAM);
    const records = s.upstream.stats().recent;
    const provider = providerBooks(records, atTier(PRICE, 'openai'));
    const served = (tier: string) => records.filter((r) => r.serviceTier === tier).length;
    console.log(
      `[tiers] served ${run.served} (${served('priority')} at priority, ${served('default')} downgraded), refused ${run.refused}; provider billed $${(provider.microUsd / 1e6).toFixed(6)} of $${BUDGET_USD}, ledger $${(ledger.billedMicroUsd / 1e6).toFixed(6)}`,
    );
    // Both tiers were served: priority, and the provider's downgrades to default.
    expect(served('priority')).toBeGreaterThan(0);
    expect(served('default')).toBeGreaterThan(0);
    expect(served('priority') + served('default')).toBe(run.served);
    // Never over the budget as the provider bills its tiers (held at priority, a downgrade
    // bills less: no overrun); the ledger charged each call at the tier it was served at, and
    // ClickHouse has every settlement, and each tier's calls and cost.
    const spent = { tenant: TEAM, api: 'chat' as const, budgetUsd: BUDGET_USD, result: run };
    await expectBooksHold(s, ch, iso.database, spent, provider);
    const byTier = await ch.query<{ tier: string; calls: string; microUsd: number }>(sql`
      SELECT service_tier AS tier, count() AS calls, sum(cost_micro_usd) AS microUsd
      FROM ${qualified(iso.database, 'events_raw_v1')} FINAL
      WHERE tenant = ${TEAM} AND type = 'reservation.settled' GROUP BY tier ORDER BY tier`);
    const tierBooks = (tier: string) =>
      providerBooks(
        records.filter((r) => r.serviceTier === tier),
        atTier(PRICE, 'openai'),
      );
    expect(byTier.map((r) => [r.tier, Number(r.calls), Number(r.microUsd)])).toEqual(
      ['default', 'priority'].map((t) => [t, served(t), tierBooks(t).microUsd]),
    );
    const events = await s.events();
    expect(
      events
        .filter((e) => e.type === 'reservation.created')
        .every((e) => e.serviceTier === 'priority'),
    ).toBe(true);
  });
});

test("Messages: auto on an account with Priority Tier is held and billed at the model's priority price", async ({
  stack,
}) => {
  const s = await stack({
    behaviour: { completion: { mode: 'fixed', tokens: 120 }, priorityTier: true },
    patch: (c) => {
      withClaude(c);
      const claude = c.models.find((m) => m.id === CLAUDE)!;
      claude.price = {
        ...(claude.price as PriceConfig),
        serviceTiers: { priority: { inputPerMTok: 6, outputPerMTok: 30 } },
      };
    },
  });
  const client = anthropic(s, KEYS.support);
  for (const stream of [false, true]) {
    const body = {
      model: CLAUDE,
      max_tokens: 200,
      messages: [{ role: 'user' as const, content: 'Summarise the incident in one line.' }],
    };
    if (stream) await client.messages.stream(body).finalMessage();
    else await client.messages.create(body);
  }
  const records = s.upstream.stats().recent.filter((r) => r.route === 'messages');
  expect(records.map((r) => r.serviceTier)).toEqual(['priority', 'priority']);
  const events = await s.events(
    (e) => e.filter((x) => x.type === 'reservation.settled').length === 2,
  );
  const created = events.filter((e) => e.type === 'reservation.created');
  const settled = events.filter((e) => e.type === 'reservation.settled');
  expect(created.map((e) => e.serviceTier)).toEqual(['priority', 'priority']);
  expect(settled.map((e) => e.serviceTier)).toEqual(['priority', 'priority']);
  // At $6 / $30: each call's cost is the provider's at its priority price.
  const price = modelPrices({ inputPerMTok: 6, outputPerMTok: 30 }, 'anthropic');
  expect(settled.map((e) => e.type === 'reservation.settled' && e.costMicroUsd)).toEqual(
    records.map((r) => providerBooks([r], price).microUsd),
  );
});

test('Messages: auto (or none) on an account with Priority Tier, a model without a priority price: sent standard_only, served and billed at standard', async ({
  stack,
}) => {
  const s = await stack({
    behaviour: { completion: { mode: 'fixed', tokens: 120 }, priorityTier: true },
    patch: withClaude,
  });
  const client = anthropic(s, KEYS.support);
  const asks = [undefined, 'auto' as const];
  for (const [i, service_tier] of asks.entries()) {
    const body = {
      model: CLAUDE,
      max_tokens: 200,
      messages: [{ role: 'user' as const, content: 'Summarise the incident in one line.' }],
      ...(service_tier ? { service_tier } : {}),
    };
    if (i % 2 === 1) await client.messages.stream(body).finalMessage();
    else await client.messages.create(body);
  }
  const records = s.upstream.stats().recent.filter((r) => r.route === 'messages');
  // Served at priority, the provider would bill Priority Tier rates the model states none of,
  // and the books (held and billed at the standard price) would be under its bill.
  expect(records.map((r) => r.serviceTier)).toEqual(['standard', 'standard']);
  const events = await s.events(
    (e) => e.filter((x) => x.type === 'reservation.settled').length === 2,
  );
  const settled = events.filter((e) => e.type === 'reservation.settled');
  expect(settled.map((e) => e.serviceTier)).toEqual(['default', 'default']);
  const standard = modelPrices(
    { inputPerMTok: 3, outputPerMTok: 15, cachedInputPerMTok: 0.3 },
    'anthropic',
  );
  expect(settled.map((e) => e.type === 'reservation.settled' && e.costMicroUsd)).toEqual(
    records.map((r) => providerBooks([r], standard).microUsd),
  );
});

test('a hostile service_tier (wrong type, huge, unknown, a tier the model has no price for) is a 400 naming it; nothing held or sent', async ({
  stack,
}) => {
  const s = await stack({ patch: withFastLane });
  const bodies = [
    { service_tier: 2 },
    { service_tier: { tier: 'priority' } },
    { service_tier: 'p'.repeat(200_000) },
    { service_tier: 'turbo' },
    { service_tier: 'scale' },
    { model: 'gpt-4o-mini', service_tier: 'priority' },
  ];
  for (const extra of bodies) {
    for (const url of ['/v1/chat/completions', '/v1/responses']) {
      const base =
        url === '/v1/responses'
          ? { model: MODEL, input: 'hi', max_output_tokens: 16 }
          : { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 16 };
      const r = await s.edge.app.inject({
        method: 'POST',
        url,
        headers: { authorization: `Bearer ${extra.model ? KEYS.support : KEY}` },
        payload: { ...base, ...extra },
      });
      expect(r.statusCode, `${url} ${JSON.stringify(extra).slice(0, 60)}`).toBe(400);
      expect(r.json().error).toMatchObject({ code: 'invalid_request' });
      expect(r.json().error.message).toContain('service_tier');
      expect(r.body.length).toBeLessThan(2_000);
    }
  }
  const noPrice = await s.edge.app.inject({
    method: 'POST',
    url: '/v1/chat/completions',
    headers: { authorization: `Bearer ${KEYS.support}` },
    payload: {
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi' }],
      service_tier: 'priority',
    },
  });
  expect(noPrice.json().error.message).toContain('price.serviceTiers.priority');
  expect((await s.settled(TEAM)).windows[0]).toMatchObject({ used: 0, held: 0 });
  expect((await s.settled('support-bot')).windows[0]).toMatchObject({ used: 0, held: 0 });
  expect(s.upstream.stats().recent).toHaveLength(0);
});
