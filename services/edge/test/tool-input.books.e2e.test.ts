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
import { anthropic, CLAUDE, post, withClaude } from './surfaces.js';
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

test('bounds whose reads the hold cannot take, a fetch or an MCP server without one: a 400 naming the field, nothing held or sent; count_tokens answers the held input', async ({
  stack,
}) => {
  const s = await stack({ behaviour, patch: withReadingDesk });
  const headers = { authorization: `Bearer ${KEY}`, 'anthropic-version': '2023-06-01' };
  const claude = (tools: object[], model = READER_CLAUDE, path = '/v1/messages') =>
    post(
      s,
      path,
      {
        model,
        max_tokens: 50,
        messages: [{ role: 'user', content: 'Read the filings.' }],
        tools,
      },
      headers,
    );
  const gpt = (tools: object[], extra: Record<string, unknown> = {}) =>
    post(
      s,
      '/v1/responses',
      {
        model: READER_GPT,
        max_output_tokens: 50,
        input: 'Read the filings.',
        tools,
        ...extra,
      },
      headers,
    );
  const search = (max_uses: number) => ({
    type: 'web_search_20250305',
    name: 'web_search',
    max_uses,
  });
  const cases: [() => ReturnType<typeof post>, string, string][] = [
    // 1,000 searches held 6,000 each: 6,000,000, above the 4,000,000 a prompt may have.
    [() => claude([search(1_000)]), 'tools.0.max_uses', '4,000,000'],
    [() => claude([search(20)], 'claude-short'), 'tools.0.max_uses', 'maxPromptTokens (100,000)'],
    [
      () => claude([search(20)], 'claude-short', '/v1/messages/count_tokens'),
      'tools.0.max_uses',
      'maxPromptTokens',
    ],
    [
      () => claude([{ type: 'web_fetch_20250910', name: 'web_fetch' }]),
      'tools.0.max_uses',
      'set its max_uses',
    ],
    [() => gpt([{ type: 'web_search' }], { max_tool_calls: 1_000 }), 'max_tool_calls', '4,000,000'],
    [
      () => gpt([{ type: 'mcp', server_label: 'docs', server_url: 'https://mcp.example.test' }]),
      'max_tool_calls',
      'set max_tool_calls',
    ],
  ];
  for (const [pending, param, says] of cases) {
    const r = await pending();
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    const error = r.body.error as { message?: string };
    expect(JSON.stringify(error)).toContain(param);
    expect(error.message).toContain(says);
  }
  // count_tokens answers as admission counts: each search of max_uses one more allowance.
  const count = async (max_uses: number) => {
    const r = await claude([search(max_uses)], READER_CLAUDE, '/v1/messages/count_tokens');
    expect(r.status).toBe(200);
    return (r.body as { input_tokens: number }).input_tokens;
  };
  expect((await count(20)) - (await count(10))).toBe(10 * ALLOWANCE);
  const usage = await s.settled(TEAM);
  expect(usage.windows[0]).toMatchObject({ used: 0, held: 0 });
  expect(s.upstream.stats().recent).toHaveLength(0);
});
