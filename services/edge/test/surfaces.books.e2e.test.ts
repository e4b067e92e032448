import type { ApiSurface } from '@holdfast/events';
import { expect } from 'vitest';
import {
  auditDrift,
  clickhouseBooks,
  providerBooks,
  startTestAggregator,
  testClickHouse,
} from './books.js';
import { edgeTest as test, KEYS, type Stack } from './harness.js';
import { anthropic, CLAUDE, withClaude } from './surfaces.js';
import { digestMessages, runQueue } from './workload.js';
import { modelPrices } from '@holdfast/config';

/**
 * The workload of seeds/000 through each surface (60 digest calls of about 370 prompt tokens,
 * max 1,024 output, 16 workers, reserve, batch-summariser's 40,000-token month budget; a 429
 * drops the item), with the categories each surface prices on its own: reasoning on chat and
 * Responses, thinking plus a prompt cache on Messages (the shared system turn written for an
 * hour and read back, each call's notes written for five minutes). Then the books: the mock's
 * own call log = ClickHouse = the ledger (the authority's counters), tokens and micro-USD.
 */
const BUDGET = 40_000;
const behaviour = {
  firstTokenLatencyMs: 30,
  completion: { mode: 'uniform' as const, min: 980, max: 1_100 },
  reasoningTokens: 128,
  promptCacheMinTokens: 5,
};
const GPT = { inputPerMTok: 0.15, outputPerMTok: 0.6, cachedInputPerMTok: 0.075 };
const SONNET = { inputPerMTok: 3, outputPerMTok: 15, cachedInputPerMTok: 0.3 };

function digest(s: Stack, api: ApiSurface, i: number): Promise<unknown> {
  const [system, user] = digestMessages(i).map((m) => m.content as string);
  const openai = s.openai(KEYS.batch);
  switch (api) {
    case 'chat':
      return openai.chat.completions.create({
        model: 'gpt-4o-mini',
        messages: digestMessages(i),
        max_tokens: 1_024,
        reasoning_effort: 'low',
      });
    case 'responses':
      return openai.responses.create({
        model: 'gpt-4o-mini',
        instructions: system,
        input: user!,
        max_output_tokens: 1_024,
        reasoning: { effort: 'low' },
      });
    default:
      return anthropic(s, KEYS.batch)
        .messages.stream({
          model: CLAUDE,
          max_tokens: 1_024,
          thinking: { type: 'adaptive' },
          system: [
            { type: 'text', text: system!, cache_control: { type: 'ephemeral', ttl: '1h' } },
          ],
          messages: [
            {
              role: 'user',
              content: [{ type: 'text', text: user!, cache_control: { type: 'ephemeral' } }],
            },
          ],
        })
        .finalMessage();
  }
}

for (const api of ['chat', 'responses', 'messages'] as const) {
  test(`${api}: seeds/000 with 16 workers never bills over 40,000; mock log = ClickHouse = ledger`, async ({
    stack,
    natsUrl,
    clickhouseUrl,
    clickhouse,
    iso,
  }) => {
    void clickhouse; // creates the test's database, dropped afterwards
    const s = await stack({ behaviour, patch: withClaude });
    const aggregator = await startTestAggregator({
      natsUrl,
      clickhouseUrl,
      names: iso.names,
      database: iso.database,
    });
    const ch = testClickHouse(clickhouseUrl);
    try {
      const run = await runQueue(60, 16, (i) => digest(s, api, i));
      const ledger = await s.settled('batch-summariser');
      const records = s.upstream.stats().recent;
      const provider = providerBooks(
        records,
        modelPrices(api === 'messages' ? SONNET : GPT, api === 'messages' ? 'anthropic' : 'openai'),
      );
      const billed = provider.prompt + provider.completion;
      console.log(
        `[seeds/000 via ${api}] served ${run.served}, refused ${run.refused}, retried after a 503 ${run.retried}; provider billed ${billed} of ${BUDGET} (${((billed / BUDGET) * 100).toFixed(1)}%), $${(provider.microUsd / 1e6).toFixed(6)}; cached ${provider.cached}, writes 5m ${provider.write5m} / 1h ${provider.write1h}, reasoning ${provider.reasoning}`,
      );
      // Never over, as the provider counts it; and the budget was used, not refused away.
      expect(billed).toBeLessThanOrEqual(BUDGET);
      expect(billed).toBeGreaterThan(0.85 * BUDGET);
      expect(run.served + run.refused).toBe(60);
      expect(run.codes).toEqual(run.refused > 0 ? { budget_exceeded: run.refused } : {});
      expect(
        records.every(
          (r) =>
            r.outcome === 'completed' && r.route === (api === 'chat' ? 'chat.completions' : api),
        ),
      ).toBe(true);
      expect(provider.calls).toBe(run.served);
      expect(provider.reasoning).toBeGreaterThan(0);
      if (api === 'messages') {
        expect(provider.cached).toBeGreaterThan(0);
        expect(provider.write5m).toBeGreaterThan(0);
        expect(provider.write1h).toBeGreaterThan(0);
      }

      // The ledger: the authority's counters.
      expect({ tokens: ledger.billedTokens, microUsd: ledger.billedMicroUsd }).toEqual({
        tokens: billed,
        microUsd: provider.microUsd,
      });
      // ClickHouse: every category of every settlement, and what the surface's view charged.
      const books = await clickhouseBooks(ch, iso.database, 'batch-summariser', api, run.served);
      const { charged, chargedMicroUsd, apis, ...rows } = books;
      expect(rows).toEqual(provider);
      expect(apis).toEqual([api]);
      expect({ charged, chargedMicroUsd }).toEqual({
        charged: billed,
        chargedMicroUsd: provider.microUsd,
      });
      // And the drift audit agrees to the token and the micro-dollar.
      expect(await auditDrift(s, ch, iso.database)).toEqual({ tokens: 0, usd: 0 });
    } finally {
      await ch.close();
      await aggregator.stop();
    }
  });
}
