import { modelPrices } from '@holdfast/config';
import type { RequestRecord } from '@holdfast/mock-upstream';
import { qualified, sql } from '@holdfast/billing-aggregator';
import { expect } from 'vitest';
import { expectBooksHold, providerBooks, withAggregator } from './books.js';
import { edgeTest as test, type Stack, type TestConfig } from './harness.js';
import { sha256Hex } from '../src/index.js';
import { chatCall, digestMessages, runQueue } from './workload.js';

/**
 * Long-context prices end to end (edge, authority, Redis, NATS, aggregator, ClickHouse, the
 * mock as the provider): a team with a $0.10 day budget calls a model priced like OpenAI's
 * GPT-5.4 ($1.25 / $10 per MTok input / output, and 2x input and 1.5x output for a request
 * whose input is above its line; the line is 1,000 tokens here, so prompts stay small), 12 at
 * a time, half streamed, a third of the prompts above the line, until the budget refuses. The
 * provider (the mock, with the same line) bills the long ones at the long rates: its bill
 * never passes the budget, and the ledger, ClickHouse and the provider agree to the
 * micro-dollar, long and short apart.
 *
 * LONGCTX_SHORT=1 runs the same workload with the model priced without `longContext` (main's
 * behaviour: held and billed at the short price while the provider bills long): it fails.
 */
const TEAM = 'long-lane';
const KEY = 'sk-hf-long-lane-1';
const MODEL = 'gpt-5.4';
const BUDGET_USD = 0.1;
const LINE = 1_000;
const SHORT = { inputPerMTok: 1.25, outputPerMTok: 10 };
const LONG = { aboveInputTokens: LINE, inputPerMTok: 2.5, outputPerMTok: 15 };
const PRICE = { ...SHORT, longContext: LONG };
const priced = process.env.LONGCTX_SHORT === '1' ? SHORT : PRICE;
const behaviour = {
  firstTokenLatencyMs: 20,
  completion: { mode: 'uniform' as const, min: 200, max: 500 },
  longContextAboveTokens: LINE,
};

function withLongLane(c: TestConfig): void {
  c.models.push({ id: MODEL, upstream: 'default', tokenizer: 'o200k_base', price: priced });
  c.tenants.push({
    id: TEAM,
    mode: 'reserve',
    budgets: [{ window: 'day', limit: BUDGET_USD, unit: 'usd' }],
    useCases: [{ id: 'chat', maxTokens: 512, models: [MODEL] }],
    keys: [{ id: 'long-1', sha256: sha256Hex(KEY), defaultUseCase: 'chat' }],
  });
}

/** The provider's prices for a call: the long ones when it billed the call long. */
function providerPrices(r: RequestRecord) {
  const short = modelPrices(SHORT, 'openai');
  return r.longContext ? modelPrices(LONG, 'openai') : short;
}

/** Every third call about 1,850 prompt tokens (five digests), the rest about 370. */
function ask(s: Stack, i: number): Promise<unknown> {
  const digest = digestMessages(i);
  const long = i % 3 === 0;
  const user = digest[1]!.content as string;
  const messages = long
    ? [digest[0]!, { role: 'user' as const, content: Array(5).fill(user).join('\n') }]
    : digest;
  return chatCall(s.openai(KEY), { model: MODEL, messages, max_tokens: 512 }, i % 2 === 1);
}

test('a usd budget holds for calls above and below the long-context line: the provider at its long rates never bills over it, and the books agree', async ({
  stack,
  natsUrl,
  clickhouseUrl,
  clickhouse,
  iso,
}) => {
  const s = await stack({ behaviour, patch: withLongLane });
  await withAggregator({ natsUrl, clickhouseUrl, clickhouse, iso }, async (ch) => {
    const run = await runQueue(60, 12, (i) => ask(s, i));
    const ledger = await s.settled(TEAM);
    const records = s.upstream.stats().recent;
    const provider = providerBooks(records, providerPrices);
    const long = records.filter((r) => r.longContext).length;
    console.log(
      `[long-context${priced === SHORT ? ', short price' : ''}] served ${run.served} (${long} long), refused ${run.refused}; provider billed $${(provider.microUsd / 1e6).toFixed(6)} of $${BUDGET_USD}, ledger $${(ledger.billedMicroUsd / 1e6).toFixed(6)}`,
    );
    expect(long).toBeGreaterThan(0);
    expect(long).toBeLessThan(run.served);
    // Never over the budget as the provider bills long context (held long above the line,
    // no overrun); the ledger billed each call as the provider did, ClickHouse has it all.
    const spent = { tenant: TEAM, api: 'chat' as const, budgetUsd: BUDGET_USD, result: run };
    await expectBooksHold(s, ch, iso.database, spent, provider);
    const byLong = await ch.query<{ long: number; calls: string; microUsd: number }>(sql`
      SELECT long_context AS long, count() AS calls, sum(cost_micro_usd) AS microUsd
      FROM ${qualified(iso.database, 'events_raw_v1')} FINAL
      WHERE tenant = ${TEAM} AND type = 'reservation.settled' GROUP BY long ORDER BY long`);
    const part = (isLong: boolean) =>
      providerBooks(
        records.filter((r) => r.longContext === isLong),
        providerPrices,
      );
    expect(byLong.map((r) => [Number(r.long), Number(r.calls), Number(r.microUsd)])).toEqual([
      [0, run.served - long, part(false).microUsd],
      [1, long, part(true).microUsd],
    ]);
    // Held long exactly when the edge's count is above the line (o200k: exact here).
    const events = await s.events();
    const created = events.filter((e) => e.type === 'reservation.created');
    for (const e of created) {
      const heldLong = priced === PRICE && e.promptTokens > LINE;
      expect(e.longContext ?? false).toBe(heldLong);
    }
  });
});
