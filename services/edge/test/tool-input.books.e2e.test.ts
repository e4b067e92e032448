import type { RequestRecord } from '@holdfast/mock-upstream';
import { expect } from 'vitest';
import { expectBooksHold, withAggregator, withFees } from './books.js';
import {
  edgeTest as test,
  entry,
  type Stack,
  type StackOptions,
  type TestConfig,
} from './harness.js';
import { sha256Hex } from '../src/index.js';
import { anthropic, CLAUDE, withClaude } from './surfaces.js';
import { digestMessages, messagesCall, responsesCall, runQueue } from './workload.js';

/**
 * What the tools the provider runs read, end to end (edge, authority, Redis, NATS, aggregator,
 * ClickHouse, the mock as the provider): every search reads a page of results, 5,000 input
 * tokens the request does not show, billed per search. A team with a 1,000,000-token day
 * budget (reserve mode: tokens, fees not counted) offers web search with a bound of 20 searches
 * a call, and the provider makes all 20: 100,000 input tokens a call. 40 calls, 8 at a time,
 * half streamed, until the budget refuses: the provider's billed input and output never pass
 * the budget, no hold is left, and the ledger, ClickHouse and the provider agree.
 */
const TEAM = 'reading-desk';
const KEY = 'sk-hf-reading-desk-1';
const LIMIT = 1_000_000;
const USES = 20;
const READER_CLAUDE = 'claude-reader';
const READER_GPT = 'gpt-reader';
const CLAUDE_PRICE = { inputPerMTok: 1, outputPerMTok: 5, toolUses: { web_search: 10 } };
const GPT_PRICE = { inputPerMTok: 1.25, outputPerMTok: 10, toolUses: { web_search: 10 } };
/** The allowance a read is held: above the 5,000 tokens the mock bills for one. */
const ALLOWANCE = 6_000;

function withReadingDesk(c: TestConfig): void {
  withClaude(c);
  c.models.push(
    {
      ...entry(c.models, CLAUDE),
      id: READER_CLAUDE,
      upstreamStateAllowanceTokens: ALLOWANCE,
      price: CLAUDE_PRICE,
    },
    {
      id: READER_GPT,
      upstream: 'default',
      tokenizer: 'o200k_base',
      upstreamStateAllowanceTokens: ALLOWANCE,
      price: GPT_PRICE,
    },
    // A model that takes at most 100,000 prompt tokens.
    {
      ...entry(c.models, CLAUDE),
      id: 'claude-short',
      upstreamStateAllowanceTokens: ALLOWANCE,
      maxPromptTokens: 100_000,
      price: CLAUDE_PRICE,
    },
  );
  c.tenants.push({
    id: TEAM,
    mode: 'reserve',
    budgets: [{ window: 'day', limit: LIMIT, unit: 'tokens' }],
    useCases: [{ id: 'chat', maxTokens: 512, models: [READER_CLAUDE, READER_GPT, 'claude-short'] }],
    keys: [{ id: 'reading-1', sha256: sha256Hex(KEY), defaultUseCase: 'chat' }],
  });
}

const behaviour = {
  firstTokenLatencyMs: 5,
  completion: { mode: 'uniform' as const, min: 100, max: 400 },
  toolUses: USES,
};

function readClaude(s: Stack, i: number): Promise<unknown> {
  const client = anthropic(s, KEY);
  const body = {
    model: READER_CLAUDE,
    max_tokens: 512,
    messages: [{ role: 'user' as const, content: digestMessages(i)[1]!.content as string }],
    tools: [{ type: 'web_search_20250305' as const, name: 'web_search' as const, max_uses: USES }],
  };
  return messagesCall(client, body, i % 2 === 1);
}

function readGpt(s: Stack, i: number): Promise<unknown> {
  const body = {
    model: READER_GPT,
    max_output_tokens: 512,
    input: digestMessages(i)[1]!.content as string,
    tools: [{ type: 'web_search' as const }],
    max_tool_calls: USES,
  };
  return responsesCall(s.openai(KEY), body, i % 2 === 1);
}

type Fixtures = Parameters<typeof withAggregator>[0] & {
  stack: (opts: StackOptions) => Promise<Stack>;
};

/** 40 calls of `call`, 8 at a time, every one making all 20 searches; the books hold. */
async function readingRun(
  fx: Fixtures,
  api: 'messages' | 'responses',
  call: (s: Stack, i: number) => Promise<unknown>,
): Promise<readonly RequestRecord[]> {
  const s = await fx.stack({ behaviour, patch: withReadingDesk });
  let records: readonly RequestRecord[] = [];
  await withAggregator(fx, async (ch) => {
    const run = await runQueue(40, 8, (i) => call(s, i));
    records = s.upstream.stats().recent;
    const price = api === 'messages' ? CLAUDE_PRICE : GPT_PRICE;
    const provider = withFees(records, price, api === 'messages' ? 'anthropic' : 'openai');
    const tokens = provider.books.prompt + provider.books.completion;
    const ledger = await s.settled(TEAM);
    console.log(
      `[tool-input] ${api}: served ${run.served}, refused ${run.refused}; ${provider.uses} searches; provider billed ${tokens} tokens (input ${provider.books.prompt}) of the ${LIMIT} limit; ledger ${ledger.billedTokens}, overruns ${ledger.overruns.count}`,
    );
    expect(ledger.windows[0]).toMatchObject({ held: 0 });
    // No usd budget: the provider's dollars are checked against the ledger's, not a limit.
    const spent = { tenant: TEAM, api, budgetUsd: 1_000, budgetTokens: LIMIT, result: run };
    await expectBooksHold(s, ch, fx.iso.database, spent, provider.books);
  });
  expect(records.every((r) => r.toolUses.web_search === USES)).toBe(true);
  return records;
}

test('Messages web search, 20 searches a call, on a tokens budget: the provider never bills input and output past it; ledger = ClickHouse = provider; no hold left', async ({
  stack,
  natsUrl,
  clickhouseUrl,
  clickhouse,
  iso,
}) => {
  // (vitest reads the fixtures a test uses from its destructured parameter)
  await readingRun({ stack, natsUrl, clickhouseUrl, clickhouse, iso }, 'messages', readClaude);
});

test('Responses web search, max_tool_calls 20, on a tokens budget: the provider never bills input and output past it; ledger = ClickHouse = provider; no hold left', async ({
  stack,
  natsUrl,
  clickhouseUrl,
  clickhouse,
  iso,
}) => {
  // (vitest reads the fixtures a test uses from its destructured parameter)
  await readingRun({ stack, natsUrl, clickhouseUrl, clickhouse, iso }, 'responses', readGpt);
});
