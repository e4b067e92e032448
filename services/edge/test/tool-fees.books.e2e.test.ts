import type { RequestRecord } from '@holdfast/mock-upstream';
import { qualified, sql } from '@holdfast/billing-aggregator';
import type { HoldfastEvent } from '@holdfast/events';
import type { ResponseCreateParamsNonStreaming } from 'openai/resources/responses/responses';
import { expect } from 'vitest';
import { clickhouseBooks, expectBooksHold, withAggregator, withFees } from './books.js';
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
 * Tools the provider runs and bills per use (web search at $10 per 1,000, file search at
 * $2.50), end to end (edge, authority, Redis, NATS, aggregator, ClickHouse, the mock as the
 * provider): a team with a $0.50 day budget offers web search on every call, 12 at a time,
 * half streamed, until the budget refuses. Each call is held its bound on the searches at
 * their fee; the provider's bill, searches included, never passes the budget, and the
 * ledger, ClickHouse and the provider agree to the micro-dollar.
 */
const TEAM = 'search-desk';
const KEY = 'sk-hf-search-desk-1';
const BUDGET_USD = 0.5;
const SEARCH_CLAUDE = 'claude-search';
const SEARCH_GPT = 'gpt-search';
const CLAUDE_PRICE = { inputPerMTok: 1, outputPerMTok: 5, toolUses: { web_search: 10 } };
const GPT_PRICE = {
  inputPerMTok: 1.25,
  outputPerMTok: 10,
  toolUses: { web_search: 10, file_search: 2.5 },
};
// OpenAI's image_generation tool: a GPT Image render billed per image at the image model's
// prices ($0.011 low to $0.17-0.25 high; $0.04 here, a medium 1024x1024 image), on top of the
// text model's tokens. The operator prices the dearest image it allows.
const IMAGE_GPT = 'gpt-image-desk';
const IMAGE_PRICE = { inputPerMTok: 1.25, outputPerMTok: 10, toolUses: { image_generation: 40 } };
// A model pricing every fee kind a Responses stored prompt may carry (prompt: {id}).
const PROMPT_GPT = 'gpt-prompt-desk';
const PROMPT_PRICE = {
  inputPerMTok: 1.25,
  outputPerMTok: 10,
  toolUses: { web_search: 10, file_search: 2.5, code_interpreter: 30, image_generation: 40 },
};
// A Chat Completions search model (one search a call, $25 per 1,000) and a team whose $0.25
// day budget it spends, about ten calls' worth.
const CHAT_TEAM = 'search-chat';
const CHAT_KEY = 'sk-hf-search-chat-1';
const CHAT_BUDGET_USD = 0.25;
const SEARCH_CHAT = 'gpt-4o-mini-search-preview';
const CHAT_PRICE = { inputPerMTok: 0.15, outputPerMTok: 0.6, toolUses: { web_search: 25 } };
/** Tokens an upstream may have written that the edge never read, a cut call (docs/budgets.md). */
const IN_FLIGHT = 4;
const behaviour = {
  firstTokenLatencyMs: 20,
  completion: { mode: 'uniform' as const, min: 100, max: 400 },
};

function withSearchDesk(c: TestConfig): void {
  withClaude(c);
  // What a search reads is input no count sees (the mock bills 5,000 tokens a tool): the
  // allowance covers it; the searches themselves are priced per use.
  c.models.push(
    {
      ...entry(c.models, CLAUDE),
      id: SEARCH_CLAUDE,
      upstreamStateAllowanceTokens: 6_000,
      price: CLAUDE_PRICE,
    },
    {
      id: SEARCH_GPT,
      upstream: 'default',
      tokenizer: 'o200k_base',
      upstreamStateAllowanceTokens: 6_000,
      price: GPT_PRICE,
    },
    {
      id: SEARCH_CHAT,
      upstream: 'default',
      tokenizer: 'o200k_base',
      searchModel: true,
      price: CHAT_PRICE,
    },
    {
      id: IMAGE_GPT,
      upstream: 'default',
      tokenizer: 'o200k_base',
      upstreamStateAllowanceTokens: 6_000,
      price: IMAGE_PRICE,
    },
    {
      id: PROMPT_GPT,
      upstream: 'default',
      tokenizer: 'o200k_base',
      upstreamStateAllowanceTokens: 6_000,
      price: PROMPT_PRICE,
    },
    // The same GPT without an allowance for what a stored prompt's tools read.
    {
      id: 'gpt-prompt-unread',
      upstream: 'default',
      tokenizer: 'o200k_base',
      price: PROMPT_PRICE,
    },
    // A GPT pricing no tool fee.
    {
      id: 'gpt-plain',
      upstream: 'default',
      tokenizer: 'o200k_base',
      upstreamStateAllowanceTokens: 6_000,
      price: { inputPerMTok: 1.25, outputPerMTok: 10 },
    },
    // The same Claude without a price for its searches.
    {
      ...entry(c.models, CLAUDE),
      id: 'claude-unpriced',
      upstreamStateAllowanceTokens: 6_000,
      price: { inputPerMTok: 1, outputPerMTok: 5 },
    },
  );
  c.tenants.push({
    id: TEAM,
    mode: 'reserve',
    budgets: [{ window: 'day', limit: BUDGET_USD, unit: 'usd' }],
    useCases: [
      {
        id: 'chat',
        maxTokens: 512,
        models: [
          SEARCH_CLAUDE,
          SEARCH_GPT,
          IMAGE_GPT,
          PROMPT_GPT,
          'gpt-prompt-unread',
          'gpt-plain',
          'claude-unpriced',
        ],
      },
    ],
    keys: [{ id: 'search-1', sha256: sha256Hex(KEY), defaultUseCase: 'chat' }],
  });
  c.tenants.push({
    id: CHAT_TEAM,
    mode: 'reserve',
    budgets: [{ window: 'day', limit: CHAT_BUDGET_USD, unit: 'usd' }],
    useCases: [{ id: 'chat', maxTokens: 512, models: [SEARCH_CHAT] }],
    keys: [{ id: 'search-chat-1', sha256: sha256Hex(CHAT_KEY), defaultUseCase: 'chat' }],
  });
}

/** What Holdfast settled the provider's call `r` at (its reservation id travels upstream). */
function settledCost(events: readonly HoldfastEvent[], r: RequestRecord): number {
  const settled = events.find(
    (e) => e.type === 'reservation.settled' && e.reservationId === r.clientRequestId,
  );
  return settled?.type === 'reservation.settled' ? settled.costMicroUsd : 0;
}

/** ClickHouse's settled tool uses and fees of the team. */
async function clickhouseFees(
  ch: Parameters<Parameters<typeof withAggregator>[1]>[0],
  database: string,
  team = TEAM,
): Promise<{ uses: number; fees: number }> {
  const [r] = await ch.query<{ uses: string; fees: string }>(sql`
    SELECT sum(tool_uses) AS uses, sum(tool_fee_micro_usd) AS fees
    FROM ${qualified(database, 'events_raw_v1')} FINAL
    WHERE tenant = ${team} AND type = 'reservation.settled'`);
  return { uses: Number(r?.uses ?? 0), fees: Number(r?.fees ?? 0) };
}

function searchClaude(s: Stack, i: number): Promise<unknown> {
  const client = anthropic(s, KEY);
  // The provider searches twice a call (the behaviour's toolUses): held 3, billed 2; every
  // fourth call allows one search: held 1, billed 1.
  const max_uses = i % 4 === 3 ? 1 : 3;
  const body = {
    model: SEARCH_CLAUDE,
    max_tokens: 512,
    messages: [{ role: 'user' as const, content: digestMessages(i)[1]!.content as string }],
    tools: [{ type: 'web_search_20250305' as const, name: 'web_search' as const, max_uses }],
  };
  return messagesCall(client, body, i % 2 === 1);
}

async function searchGpt(s: Stack, i: number): Promise<unknown> {
  // A search and a file search (the behaviour's toolUses: 1 of each): held at 3 calls of the
  // dearer, billed at each one's fee.
  return gptCall(s, i, {
    model: SEARCH_GPT,
    tools: [
      { type: 'web_search' as const },
      { type: 'file_search' as const, vector_store_ids: ['vs_reports'] },
    ],
    max_tool_calls: 3,
  });
}

/** A Responses call that asks for an image (the provider renders one: the behaviour's toolUses). */
async function imageGpt(s: Stack, i: number): Promise<unknown> {
  return gptCall(s, i, {
    model: IMAGE_GPT,
    tools: [{ type: 'image_generation' as const, quality: 'medium' as const }],
    max_tool_calls: 2,
  });
}

/**
 * A Responses call naming a stored prompt whose tools the request does not show (the mock's
 * storedPromptTools: web search and image generation, one use each).
 */
async function promptGpt(s: Stack, i: number): Promise<unknown> {
  return gptCall(s, i, {
    model: PROMPT_GPT,
    prompt: { id: 'pmpt_research_desk', version: '3' },
    max_tool_calls: 2,
  });
}

/** A Responses call of `extra` on digest `i`: JSON on even calls, streamed to its end on odd. */
function gptCall(
  s: Stack,
  i: number,
  extra: Omit<ResponseCreateParamsNonStreaming, 'input' | 'max_output_tokens'>,
): Promise<void> {
  const body = { max_output_tokens: 512, input: digestMessages(i)[1]!.content as string, ...extra };
  return responsesCall(s.openai(KEY), body, i % 2 === 1);
}

type BooksFixtures = Parameters<typeof withAggregator>[0] & {
  stack: (opts: StackOptions) => Promise<Stack>;
};

/**
 * 60 calls of `call`, 12 at a time, on a provider that uses each tool `toolUses` times; the
 * books hold (never over the budget, ledger = ClickHouse = provider, no overrun) and ClickHouse
 * has the provider's tool uses and fees. Returns the provider's call log.
 */
async function booksRun(
  fx: BooksFixtures,
  what: {
    api: 'messages' | 'responses';
    toolUses: number;
    price: Parameters<typeof withFees>[1];
    storedPromptTools?: string[];
  },
  call: (s: Stack, i: number) => Promise<unknown>,
): Promise<readonly RequestRecord[]> {
  const s = await fx.stack({
    behaviour: {
      ...behaviour,
      toolUses: what.toolUses,
      storedPromptTools: what.storedPromptTools ?? [],
    },
    patch: withSearchDesk,
  });
  let records: readonly RequestRecord[] = [];
  await withAggregator(fx, async (ch) => {
    const run = await runQueue(60, 12, (i) => call(s, i));
    records = s.upstream.stats().recent;
    const provider = withFees(
      records,
      what.price,
      what.api === 'messages' ? 'anthropic' : 'openai',
    );
    const ledger = await s.settled(TEAM);
    console.log(
      `[tool-fees] ${what.api}: served ${run.served}, refused ${run.refused}; ${provider.uses} tool uses ($${(provider.fees / 1e6).toFixed(6)}); provider billed $${(provider.books.microUsd / 1e6).toFixed(6)} of $${BUDGET_USD}, ledger $${(ledger.billedMicroUsd / 1e6).toFixed(6)}`,
    );
    const spent = { tenant: TEAM, api: what.api, budgetUsd: BUDGET_USD, result: run };
    await expectBooksHold(s, ch, fx.iso.database, spent, provider.books);
    expect(await clickhouseFees(ch, fx.iso.database)).toEqual({
      uses: provider.uses,
      fees: provider.fees,
    });
  });
  return records;
}

/** A test of booksRun: `check` reads the provider's call log. */
function booksTest(
  name: string,
  what: Parameters<typeof booksRun>[1],
  call: (s: Stack, i: number) => Promise<unknown>,
  check: (records: readonly RequestRecord[]) => void,
): void {
  fxTest(name, async (fx) => check(await booksRun(fx, what, call)));
}

/** A test given the fixtures of a books run (the stack and ClickHouse's). */
function fxTest(name: string, body: (fx: BooksFixtures) => Promise<void>): void {
  test(name, async ({ stack, natsUrl, clickhouseUrl, clickhouse, iso }) => {
    // (vitest reads the fixtures a test uses from its destructured parameter)
    await body({ stack, natsUrl, clickhouseUrl, clickhouse, iso });
  });
}

booksTest(
  'Messages web search on a usd budget: the provider, searches included, never bills over it, and the books agree',
  { api: 'messages', toolUses: 2, price: CLAUDE_PRICE },
  searchClaude,
  (records) => {
    // Two searches a call, one where max_uses allowed one.
    expect(new Set(records.map((r) => r.toolUses.web_search))).toEqual(new Set([1, 2]));
  },
);

booksTest(
  'Responses web and file search on a usd budget: held at max_tool_calls, billed per call, the books agree',
  { api: 'responses', toolUses: 1, price: GPT_PRICE },
  searchGpt,
  (records) => {
    expect(records.every((r) => r.toolUses.web_search === 1 && r.toolUses.file_search === 1)).toBe(
      true,
    );
  },
);

booksTest(
  'Responses image generation on a usd budget: held at max_tool_calls x the image fee, billed per image, the books agree',
  { api: 'responses', toolUses: 1, price: IMAGE_PRICE },
  imageGpt,
  (records) => expect(records.every((r) => r.toolUses.image_generation === 1)).toBe(true),
);

booksTest(
  'Responses stored prompts carrying web search and image generation on a usd budget: held at max_tool_calls x the dearest fee, billed per *_call item, the books agree',
  {
    api: 'responses',
    toolUses: 1,
    price: PROMPT_PRICE,
    storedPromptTools: ['web_search', 'image_generation'],
  },
  promptGpt,
  (records) => {
    expect(
      records.every((r) => r.toolUses.web_search === 1 && r.toolUses.image_generation === 1),
    ).toBe(true);
  },
);

test('a provider that searches past max_uses is billed in full and recorded as an overrun', async ({
  stack,
}) => {
  const s = await stack({
    behaviour: { ...behaviour, toolUses: 5, ignoreToolBound: true },
    patch: withSearchDesk,
  });
  await anthropic(s, KEY).messages.create({
    model: SEARCH_CLAUDE,
    max_tokens: 100,
    messages: [{ role: 'user', content: 'Find the latest annual report.' }],
    tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 2 }],
  });
  const records = s.upstream.stats().recent;
  expect(records.map((r) => r.toolUses)).toEqual([{ web_search: 5 }]);
  const provider = withFees(records, CLAUDE_PRICE, 'anthropic');
  const ledger = await s.settled(TEAM);
  expect(ledger.billedMicroUsd).toBe(provider.books.microUsd);
  const events = await s.events((e) => e.some((x) => x.type === 'reservation.overrun'));
  const settled = events.find((e) => e.type === 'reservation.settled');
  expect(settled).toMatchObject({ toolUses: 5, toolFeeMicroUsd: 50_000 });
  const overrun = events.find((e) => e.type === 'reservation.overrun');
  // Held 2 searches; 3 more were billed on top of the hold.
  expect(overrun?.type === 'reservation.overrun' && overrun.overrunMicroUsd).toBeGreaterThan(0);
});

test('hostile tool bounds, unknown tool versions, an unpriced search: a 400 naming the field, nothing held or sent', async ({
  stack,
}) => {
  const s = await stack({ patch: withSearchDesk });
  const post = async (path: string, body: object) => {
    const res = await postEdge(s, path, body);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const claude = (tool: Record<string, unknown>, model = SEARCH_CLAUDE) =>
    post('/v1/messages', {
      model,
      max_tokens: 50,
      messages: [{ role: 'user', content: 'Search.' }],
      tools: [{ name: 'lookup', input_schema: { type: 'object' } }, tool],
    });
  const search = (extra: Record<string, unknown>) => ({
    type: 'web_search_20250305',
    name: 'web_search',
    ...extra,
  });
  const cases: [
    () => Promise<{ status: number; body: Record<string, unknown> }>,
    string,
    string,
  ][] = [
    [() => claude(search({})), 'tools.1.max_uses', 'set its max_uses'],
    [() => claude(search({ max_uses: 0 })), 'tools.1.max_uses', 'integer from 1 to 1,000'],
    [() => claude(search({ max_uses: -3 })), 'tools.1.max_uses', 'integer from 1 to 1,000'],
    [() => claude(search({ max_uses: 1e9 })), 'tools.1.max_uses', 'integer from 1 to 1,000'],
    [() => claude(search({ max_uses: 2.5 })), 'tools.1.max_uses', 'integer from 1 to 1,000'],
    [() => claude(search({ max_uses: '3' })), 'tools.1.max_uses', 'integer from 1 to 1,000'],
    [() => claude(search({ max_uses: null })), 'tools.1.max_uses', 'set its max_uses'],
    // A version Holdfast has not seen is still a search, billed per use.
    [
      () => claude({ type: 'web_search_29991231', name: 'web_search' }),
      'tools.1.max_uses',
      'max_uses',
    ],
    [
      () => claude(search({ max_uses: 3 }), 'claude-unpriced'),
      'tools.1',
      'price.toolUses.web_search',
    ],
  ];
  const gpt = (extra: Record<string, unknown>) =>
    post('/v1/responses', {
      model: SEARCH_GPT,
      max_output_tokens: 50,
      input: 'Search.',
      tools: [{ type: 'web_search_preview_2025_03_11' }],
      ...extra,
    });
  cases.push(
    [() => gpt({}), 'max_tool_calls', 'set max_tool_calls'],
    [() => gpt({ max_tool_calls: 5_000 }), 'max_tool_calls', 'integer from 1 to 1,000'],
    [() => gpt({ max_tool_calls: 0 }), 'max_tool_calls', ''],
    [() => gpt({ max_tool_calls: -1 }), 'max_tool_calls', ''],
    [() => gpt({ max_tool_calls: 1.5 }), 'max_tool_calls', ''],
    [() => gpt({ max_tool_calls: 'many' }), 'max_tool_calls', ''],
    [
      () => gpt({ max_tool_calls: 2, tools: [{ type: 'code_interpreter' }] }),
      'tools.0',
      'price.toolUses.code_interpreter',
    ],
    [
      () => gpt({ max_tool_calls: 2, tools: [{ type: 'image_generation' }] }),
      'tools.0',
      'price.toolUses.image_generation',
    ],
    [
      () => gpt({ model: IMAGE_GPT, tools: [{ type: 'image_generation', partial_images: 2 }] }),
      'tools.0.partial_images',
      'partial_images',
    ],
    [
      () =>
        gpt({
          model: IMAGE_GPT,
          max_tool_calls: 1,
          tools: [{ type: 'image_generation', partial_images: 3 }],
        }),
      'tools.0.partial_images',
      'partial_images',
    ],
    // A stored prompt may carry any tool billed per use, which the request does not show.
    [
      () => gpt({ model: PROMPT_GPT, tools: [], prompt: { id: 'pmpt_1' } }),
      'max_tool_calls',
      'stored prompt',
    ],
    [
      () => gpt({ model: PROMPT_GPT, tools: [], prompt: { id: 'pmpt_1' }, max_tool_calls: 0 }),
      'max_tool_calls',
      '',
    ],
    [
      () => gpt({ model: 'gpt-plain', tools: [], prompt: { id: 'pmpt_1' }, max_tool_calls: 2 }),
      'prompt',
      'prices none of them',
    ],
    [
      () => gpt({ tools: [], prompt: { id: 'pmpt_1' }, max_tool_calls: 2 }),
      'prompt',
      'price.toolUses.code_interpreter, price.toolUses.image_generation',
    ],
    // Every fee priced, but no allowance for what the prompt's tools read (docs/budgets.md).
    [
      () =>
        gpt({ model: 'gpt-prompt-unread', tools: [], prompt: { id: 'pmpt_1' }, max_tool_calls: 2 }),
      'prompt',
      'upstreamStateAllowanceTokens',
    ],
  );
  for (const [pending, param, says] of cases) {
    const r = await pending();
    const error = r.body.error as {
      message?: string;
      param?: string;
      type?: string;
      code?: string;
    };
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(JSON.stringify(error)).toContain(param);
    // OpenAI's errors name it (Anthropic's have no param).
    if (error.param !== undefined) expect(error.param).toBe(param);
    expect(error.message).toContain(says);
  }
  const usage = await s.settled(TEAM);
  expect(usage.windows[0]).toMatchObject({ used: 0, held: 0 });
  // A search model's n choices: how many searches they make no usage says (was held one).
  const choices = await s
    .openai(CHAT_KEY)
    .chat.completions.create({
      model: SEARCH_CHAT,
      max_tokens: 50,
      n: 3,
      messages: [{ role: 'user', content: 'Search.' }],
    })
    .catch((e: { status?: number; error?: { param?: string; message?: string } }) => e);
  expect(choices).toMatchObject({ status: 400, error: { param: 'n' } });
  expect((await s.settled(CHAT_TEAM)).windows[0]).toMatchObject({ used: 0, held: 0 });
  expect(s.upstream.stats().recent).toHaveLength(0);
});

/** A POST of the team's key to the edge, as a raw client makes it (either surface). */
function postEdge(s: Stack, path: string, body: object, signal?: AbortSignal): Promise<Response> {
  return fetch(`${s.edge.url}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${KEY}`,
      'anthropic-version': '2023-06-01',
    },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });
}

/**
 * A streamed call with searches that its client leaves as soon as `seen` shows in the stream
 * (the first search under way): the edge ends the upstream call, and the provider bills the
 * searches it ran all the same.
 */
async function leaveAt(s: Stack, path: string, body: object, seen: string): Promise<void> {
  const left = new AbortController();
  const res = await postEdge(s, path, { ...body, stream: true }, left.signal);
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      if (text.includes(seen)) break;
    }
  } finally {
    left.abort();
  }
  expect(text).toContain(seen);
}

const claudeSearch = {
  model: SEARCH_CLAUDE,
  max_tokens: 512,
  messages: [{ role: 'user', content: 'What changed in the filings this week?' }],
  tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 3 }],
};
const gptSearch = {
  model: SEARCH_GPT,
  max_output_tokens: 512,
  input: 'What changed in the filings this week?',
  tools: [{ type: 'web_search' }, { type: 'file_search', vector_store_ids: ['vs_reports'] }],
  max_tool_calls: 3,
};

fxTest(
  'clients that leave after the first search, upstreams that break off after it: the provider, searches included, never bills more than Holdfast did; ledger = ClickHouse; no hold left',
  async (fx) => {
    // Each search takes 150 ms: the client leaves, or the upstream breaks off, while it runs.
    const s = await fx.stack({
      behaviour: { ...behaviour, firstTokenLatencyMs: 150, toolUses: 2 },
      patch: withSearchDesk,
    });
    const calls = 3;
    await withAggregator(fx, async (ch) => {
      const all = (n: number, call: () => Promise<unknown>) =>
        Promise.all(Array.from({ length: n }, call));
      await all(calls, () => leaveAt(s, '/v1/messages', claudeSearch, '"server_tool_use"'));
      await all(calls, () => leaveAt(s, '/v1/responses', gptSearch, '"web_search_call"'));
      // The leavers' holds close once the edge saw them go; until then they count against the
      // day window (on a loaded box a call below was refused budget_exceeded behind them).
      await s.settled(TEAM);
      // The upstream's error event right after the first search block (its first break point).
      s.upstream.failNext({ status: 'error', count: calls, afterTokens: 0 });
      await all(calls, async () => {
        const res = await postEdge(s, '/v1/messages', { ...claudeSearch, stream: true });
        expect(await res.text()).toContain('"server_tool_use"');
      });
      const ledger = await s.settled(TEAM);
      const records = s.upstream.stats().recent;
      expect(records).toHaveLength(3 * calls);
      expect(records.every((r) => r.outcome !== 'completed')).toBe(true);
      const messages = withFees(
        records.filter((r) => 'web_search' in r.toolUses && !('file_search' in r.toolUses)),
        CLAUDE_PRICE,
        'anthropic',
      );
      const responses = withFees(
        records.filter((r) => 'file_search' in r.toolUses),
        GPT_PRICE,
        'openai',
      );
      const provider = messages.books.microUsd + responses.books.microUsd;
      // (clickhouseBooks waits for every settlement to be in)
      const books = await clickhouseBooks(ch, fx.iso.database, TEAM, 'messages', 3 * calls);
      const fees = await clickhouseFees(ch, fx.iso.database);
      console.log(
        `[tool-fees] cut calls: provider billed $${(provider / 1e6).toFixed(6)} (${messages.uses + responses.uses} tool uses, $${((messages.fees + responses.fees) / 1e6).toFixed(6)}); Holdfast billed $${(ledger.billedMicroUsd / 1e6).toFixed(6)} (${fees.uses} tool uses, $${(fees.fees / 1e6).toFixed(6)}); ClickHouse $${(books.microUsd / 1e6).toFixed(6)}`,
      );
      expect(ledger.billedMicroUsd).toBeGreaterThanOrEqual(provider);
      // Call by call: what Holdfast settled against what the provider billed it.
      const events = await s.events(
        (e) => e.filter((x) => x.type === 'reservation.settled').length === 3 * calls,
      );
      const short = records.flatMap((r) => {
        const billed = settledCost(events, r);
        const price = 'file_search' in r.toolUses ? GPT_PRICE : CLAUDE_PRICE;
        const api = 'file_search' in r.toolUses ? 'openai' : 'anthropic';
        const owed = withFees([r], price, api).books.microUsd;
        return billed >= owed ? [] : [{ uses: r.toolUses, owed, billed }];
      });
      expect(short).toEqual([]);
      expect(fees.fees).toBeGreaterThanOrEqual(messages.fees + responses.fees);
      expect(books.microUsd).toBe(ledger.billedMicroUsd);
      expect(ledger.windows[0]).toMatchObject({ held: 0 });
      expect(ledger.billedMicroUsd).toBeLessThanOrEqual(BUDGET_USD * 1e6);
    });
  },
);

fxTest(
  'clients that leave while an image renders, or at the first search of a stored prompt: billed the bound held, never below the provider, call by call; ledger = ClickHouse; no hold left',
  async (fx) => {
    // Each tool call takes 150 ms: the client leaves while it runs.
    const s = await fx.stack({
      behaviour: {
        ...behaviour,
        firstTokenLatencyMs: 150,
        toolUses: 1,
        storedPromptTools: ['web_search', 'image_generation'],
      },
      patch: withSearchDesk,
    });
    // Two of each: each is held 2 images ($0.08) and billed them, within the $0.50.
    const calls = 2;
    const ask = {
      max_output_tokens: 512,
      input: 'Draw this week in one picture.',
      max_tool_calls: 2,
    };
    await withAggregator(fx, async (ch) => {
      const all = (n: number, call: () => Promise<unknown>) =>
        Promise.all(Array.from({ length: n }, call));
      const image = { ...ask, model: IMAGE_GPT, tools: [{ type: 'image_generation' }] };
      await all(calls, () => leaveAt(s, '/v1/responses', image, '"image_generation_call"'));
      const prompt = { ...ask, model: PROMPT_GPT, prompt: { id: 'pmpt_research_desk' } };
      await all(calls, () => leaveAt(s, '/v1/responses', prompt, '"web_search_call"'));
      const priceOf = (r: RequestRecord) =>
        'web_search' in r.toolUses ? PROMPT_PRICE : IMAGE_PRICE;
      const events = await s.events(
        (e) => e.filter((x) => x.type === 'reservation.settled').length === 2 * calls,
      );
      const records = s.upstream.stats().recent;
      expect(records).toHaveLength(2 * calls);
      expect(records.every((r) => r.outcome !== 'completed')).toBe(true);
      const short = records.flatMap((r) => {
        const billed = settledCost(events, r);
        const owed = withFees([r], priceOf(r), 'openai').books.microUsd;
        return billed >= owed ? [] : [{ uses: r.toolUses, owed, billed }];
      });
      const provider = records.reduce(
        (n, r) => n + withFees([r], priceOf(r), 'openai').books.microUsd,
        0,
      );
      const ledger = await s.settled(TEAM);
      const books = await clickhouseBooks(ch, fx.iso.database, TEAM, 'responses', 2 * calls);
      const fees = await clickhouseFees(ch, fx.iso.database);
      console.log(
        `[tool-fees] cut image and stored-prompt calls: provider billed $${(provider / 1e6).toFixed(6)}; Holdfast billed $${(ledger.billedMicroUsd / 1e6).toFixed(6)} (${fees.uses} tool uses, $${(fees.fees / 1e6).toFixed(6)}); ClickHouse $${(books.microUsd / 1e6).toFixed(6)}`,
      );
      expect(short).toEqual([]);
      // Each call billed its bound of 2 tool calls (the uses seen, the rest at the dearest fee,
      // image generation), the provider running 1 or 2.
      expect(fees.uses).toBe(2 * 2 * calls);
      expect(books.microUsd).toBe(ledger.billedMicroUsd);
      expect(ledger.windows[0]).toMatchObject({ held: 0 });
      expect(ledger.billedMicroUsd).toBeLessThanOrEqual(BUDGET_USD * 1e6);
    });
  },
);

/**
 * A chat call to the search model: JSON (i % 4 of 0 or 2), streamed to its end (1), or
 * streamed and left at the first content chunk (3): the SDK ends the request as the loop
 * breaks, the edge ends the upstream call, and the provider bills the search all the same.
 */
async function searchChat(s: Stack, i: number): Promise<unknown> {
  const body = {
    model: SEARCH_CHAT,
    max_tokens: 512,
    messages: [{ role: 'user' as const, content: digestMessages(i)[1]!.content as string }],
    web_search_options: { search_context_size: 'low' as const },
  };
  const openai = s.openai(CHAT_KEY);
  if (i % 2 === 0) return openai.chat.completions.create(body);
  const chunks = await openai.chat.completions.create({ ...body, stream: true });
  for await (const chunk of chunks) if (i % 4 === 3 && chunk.choices[0]?.delta.content) break;
  return undefined;
}

fxTest(
  'Chat Completions search model on a usd budget, clients leaving mid-stream: a search held and billed per call, the provider never over the budget nor over Holdfast, call by call; ledger = ClickHouse; no hold left',
  async (fx) => {
    // Tokens 5 ms apart: a streamed reply of 100-400 tokens runs long enough to be left.
    const s = await fx.stack({
      behaviour: { ...behaviour, tokenDelayMs: 5 },
      patch: withSearchDesk,
    });
    await withAggregator(fx, async (ch) => {
      const run = await runQueue(60, 12, (i) => searchChat(s, i));
      const records = s.upstream.stats().recent;
      const provider = withFees(records, CHAT_PRICE, 'openai');
      const ledger = await s.settled(CHAT_TEAM);
      const books = await clickhouseBooks(ch, fx.iso.database, CHAT_TEAM, 'chat', run.served);
      const fees = await clickhouseFees(ch, fx.iso.database, CHAT_TEAM);
      const left = records.filter((r) => r.outcome === 'aborted').length;
      console.log(
        `[tool-fees] chat search: served ${run.served} (${left} left mid-stream), refused ${run.refused}; provider billed $${(provider.books.microUsd / 1e6).toFixed(6)} (${provider.uses} searches, $${(provider.fees / 1e6).toFixed(6)}) of $${CHAT_BUDGET_USD}; Holdfast $${(ledger.billedMicroUsd / 1e6).toFixed(6)} (${fees.uses} searches, $${(fees.fees / 1e6).toFixed(6)}); ClickHouse $${(books.microUsd / 1e6).toFixed(6)}`,
      );
      expect(run.refused).toBeGreaterThan(0);
      expect(run.codes).toEqual({ budget_exceeded: run.refused });
      expect(records).toHaveLength(run.served);
      expect(records.every((r) => r.toolUses.web_search === 1)).toBe(true);
      expect(left).toBeGreaterThan(0);
      expect(provider.books.microUsd).toBeLessThanOrEqual(CHAT_BUDGET_USD * 1e6);
      expect(ledger.billedMicroUsd).toBeLessThanOrEqual(CHAT_BUDGET_USD * 1e6);
      // Call by call: what Holdfast settled against what the provider billed it; the same to
      // the micro-dollar for a call that ran to its end, its search included for one its client
      // left, never less but for the few tokens the upstream wrote that the edge never read
      // (docs/budgets.md, "What Holdfast cannot see": at most IN_FLIGHT a cut call).
      const inFlight = Math.ceil(IN_FLIGHT * CHAT_PRICE.outputPerMTok);
      const events = await s.events(
        (e) => e.filter((x) => x.type === 'reservation.settled').length >= run.served,
      );
      const off = records.flatMap((r) => {
        const billed = settledCost(events, r);
        const owed = withFees([r], CHAT_PRICE, 'openai').books.microUsd;
        const ok = r.outcome === 'completed' ? billed === owed : billed >= owed - inFlight;
        return ok ? [] : [{ outcome: r.outcome, owed, billed }];
      });
      expect(off).toEqual([]);
      expect(fees).toEqual({ uses: run.served, fees: provider.fees });
      expect(books.microUsd).toBe(ledger.billedMicroUsd);
      expect(ledger.billedMicroUsd).toBeGreaterThanOrEqual(
        provider.books.microUsd - left * inFlight,
      );
      expect(ledger.windows[0]).toMatchObject({ held: 0 });
    });
  },
);
