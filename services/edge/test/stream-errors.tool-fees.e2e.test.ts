import type { HoldfastEvent } from '@holdfast/events';
import { expect } from 'vitest';
import { withFees } from './books.js';
import { edgeTest as test, entry, nothingHeldAnywhere, type TestConfig } from './harness.js';
import { sha256Hex } from '../src/index.js';
import { CLAUDE, chatText, withClaude, words } from './surfaces.js';

/**
 * A provider-run tool billed per use (a chat search model's search, $25 per 1,000) in an
 * attempt the provider failed inside its stream before the reply began (a chat error chunk
 * after the role chunk): the provider bills that attempt's prompt and its search, and the
 * retry's again. The edge bills the failed attempt the search it was held for (it reported no
 * usage), so before the retry the hold grows by the search's fee as well as by the prompt: a
 * window with room for the failed prompt but not for its search is not retried and never
 * passes its limit; the books are the provider's to the micro-USD.
 */
// A search model whose search content is free (a `-search-preview`): its prompt is what the
// edge counts. $1 and $5 per million tokens: 1 and 5 micro-USD a token.
const MODEL = 'gpt-desk-search-preview';
const PRICE = { inputPerMTok: 1, outputPerMTok: 5, toolUses: { web_search: 25 } };
const SEARCH_MICRO_USD = 25_000;
const PROBE = { tenant: 'search-probe', key: 'sk-hf-search-probe-1' };
const TIGHT = { tenant: 'search-tight', key: 'sk-hf-search-tight-1' };
const MAX_TOKENS = 300;
// A Claude offering web search ($10 per 1,000).
const CLAUDE_SEARCH = 'claude-search';
const CLAUDE_PRICE = { inputPerMTok: 1, outputPerMTok: 5, toolUses: { web_search: 10 } };

const body = {
  model: MODEL,
  max_tokens: MAX_TOKENS,
  stream: true,
  messages: [{ role: 'user', content: words(20) }],
  web_search_options: { search_context_size: 'low' },
};

function withSearch(tightLimitUsd: () => number) {
  return (c: TestConfig): void => {
    withClaude(c);
    c.models.push({
      ...entry(c.models, CLAUDE),
      id: CLAUDE_SEARCH,
      upstreamStateAllowanceTokens: 6_000,
      price: CLAUDE_PRICE,
    });
    c.models.push({
      id: MODEL,
      upstream: 'default',
      tokenizer: 'o200k_base',
      searchModel: true,
      price: PRICE,
    });
    for (const [t, limit] of [
      [PROBE, 5],
      [TIGHT, tightLimitUsd()],
    ] as const) {
      c.tenants.push({
        id: t.tenant,
        mode: 'reserve',
        budgets: [{ window: 'day', limit, unit: 'usd' }],
        useCases: [{ id: 'chat', maxTokens: 512, models: [MODEL, CLAUDE_SEARCH] }],
        keys: [{ id: `${t.tenant}-1`, sha256: sha256Hex(t.key), defaultUseCase: 'chat' }],
      });
    }
  };
}

const call = (url: string, key: string) => chatText(url, key, body);

const of = (events: HoldfastEvent[], id: string | null | undefined) =>
  events.filter((e) => 'reservationId' in e && e.reservationId === id);

test('a search billed by an attempt that failed in its stream: the hold grows by its fee before the retry; no room for it: not retried, no window past its limit, the books the provider billed', async ({
  stack,
  redis,
  iso,
}) => {
  let tightUsd = 5;
  const s = await stack({
    patch: withSearch(() => tightUsd),
    behaviour: { completion: { mode: 'fraction', fraction: 1 } },
  });

  // With room: the first attempt searched, then failed; the retry searched and answered.
  s.upstream.failNext({ status: 'error', count: 1 });
  const probe = await call(s.edge.url, PROBE.key);
  expect(probe.status).toBe(200);
  expect(probe.text).toContain('[DONE]');
  expect(probe.text).not.toContain('"error"');
  await s.settled(PROBE.tenant);
  const [failed, answered] = s.upstream.stats().recent;
  expect(failed).toMatchObject({ outcome: 'error_stream', toolUses: { web_search: 1 } });
  expect(answered).toMatchObject({ outcome: 'completed', toolUses: { web_search: 1 } });
  const probeEvents = of(await s.events(), failed!.clientRequestId);
  const created = probeEvents.find((e) => e.type === 'reservation.created');
  const grown = probeEvents.filter((e) => e.type === 'reservation.extended');
  const settled = probeEvents.find((e) => e.type === 'reservation.settled');
  // The failed attempt's prompt (search results included) and its search.
  const failedMicroUsd = failed!.promptTokens + SEARCH_MICRO_USD;
  expect(grown).toHaveLength(1);
  expect(grown[0]).toMatchObject({ addedMicroUsd: failedMicroUsd });
  expect(settled).toMatchObject({ outcome: 'completed', toolUses: 2 });
  expect(settled?.type === 'reservation.settled' && settled.costMicroUsd).toBe(
    withFees([failed!, answered!], PRICE, 'openai').books.microUsd,
  );
  expect(probeEvents.filter((e) => e.type === 'reservation.overrun')).toEqual([]);

  // Room for the failed attempt's prompt, not for its search as well.
  const heldMicroUsd = created?.type === 'reservation.created' ? created.heldMicroUsd : NaN;
  const limit = heldMicroUsd + failed!.promptTokens + SEARCH_MICRO_USD / 2;
  tightUsd = limit / 1_000_000;
  await s.applyConfig();
  s.upstream.failNext({ status: 'error', count: 1 });
  const tight = await call(s.edge.url, TIGHT.key);
  expect(tight.status).toBe(502);
  expect(JSON.parse(tight.text)).toMatchObject({ error: { code: 'upstream_error' } });
  const usage = await s.settled(TIGHT.tenant);
  const records = s.upstream.stats().recent.slice(2);
  expect(records.map((r) => r.outcome)).toEqual(['error_stream']);
  for (const w of usage.windows) expect(w.used).toBeLessThanOrEqual(w.limit);
  expect(usage.windows.map((w) => w.limit)).toEqual([limit]);
  expect(usage.overruns.count).toBe(0);
  expect(usage.billedMicroUsd).toBe(withFees(records, PRICE, 'openai').books.microUsd);
  const tightEvents = of(await s.events(), records[0]!.clientRequestId);
  expect(tightEvents.map((e) => e.type)).toEqual(['reservation.created', 'reservation.settled']);
  expect(tightEvents[1]).toMatchObject({ outcome: 'upstream_error', toolUses: 1 });
  await nothingHeldAnywhere(redis, iso.keyPrefix);
});

test('Messages offering web search (max_uses 3): an overload before any block, retried, is billed the searches the provider ran (none), not the bound', async ({
  stack,
}) => {
  // The model answers without searching.
  const s = await stack({ patch: withSearch(() => 5), behaviour: { toolUses: 0 } });
  s.upstream.failNext({ status: 'error', count: 1 });
  const res = await fetch(`${s.edge.url}/v1/messages`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-api-key': PROBE.key,
      'anthropic-version': '2023-06-01',
    },
    body: JSON.stringify({
      model: CLAUDE_SEARCH,
      max_tokens: 100,
      stream: true,
      messages: [{ role: 'user', content: words(20) }],
      tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 3 }],
    }),
  });
  expect(res.status).toBe(200);
  expect(await res.text()).toContain('message_stop');
  const usage = await s.settled(PROBE.tenant);
  const records = s.upstream.stats().recent;
  expect(records.map((r) => [r.outcome, r.toolUses.web_search ?? 0])).toEqual([
    ['error_stream', 0],
    ['completed', 0],
  ]);
  expect(usage.billedMicroUsd).toBe(withFees(records, CLAUDE_PRICE, 'anthropic').books.microUsd);
  expect(usage.overruns.count).toBe(0);
});
