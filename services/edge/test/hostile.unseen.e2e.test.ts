import { expect } from 'vitest';
import { edgeTest as test, entry, KEYS, type Stack, type TestConfig } from './harness.js';
import { CLAUDE, post, responsesFile, withClaude } from './surfaces.js';

/**
 * Red team, input the edge cannot see. A file is billed by its pages (the text and an image of
 * each), which no count of the request's bytes can see: the mock bills each file part 3,000
 * tokens on top of its JSON, as a two-page PDF. A tool the provider runs (web search, MCP) is
 * billed what it reads as input: the mock bills 5,000 a use, as a page of search results. A
 * 2,000-token budget: a call the edge counted from its bytes would be admitted on a hold of a
 * few dozen tokens and billed far past the limit.
 */

/** A tiny PDF (a few bytes of base64): what its bytes say is nothing like what it costs. */
const PDF = 'data:application/pdf;base64,JVBERi0xLjQKJcfsj6IK';

const LIMIT = 2_000;

function small(c: TestConfig): void {
  withClaude(c);
  entry(c.tenants, 'support-bot').budgets = [{ window: 'month', limit: LIMIT, unit: 'tokens' }];
  // Claude counted locally (no count_tokens), and a copy with a stated allowance.
  c.models.push(
    { ...entry(c.models, CLAUDE), id: 'claude-local', tokenizer: 'estimate' },
    {
      ...entry(c.models, CLAUDE),
      id: 'claude-files',
      tokenizer: 'estimate',
      upstreamStateAllowanceTokens: 6_000,
    },
    {
      ...entry(c.models, 'gpt-4o-mini'),
      id: 'gpt-files',
      upstreamStateAllowanceTokens: 6_000,
      // Its search and file search fees (held at max_tool_calls, billed per call).
      price: {
        ...(entry(c.models, 'gpt-4o-mini').price as object),
        toolUses: { web_search: 10, file_search: 2.5 },
      },
    },
  );
  const uc = entry(
    entry(c.tenants, 'support-bot').useCases as { id: string; models: string[] }[],
    'UC-101',
  );
  uc.models.push('claude-local', 'claude-files', 'gpt-files');
}

const auth = { authorization: `Bearer ${KEYS.support}` };

/** small, with room for a call of several allowances. */
function wide(c: TestConfig): void {
  small(c);
  entry(c.tenants, 'support-bot').budgets = [{ window: 'month', limit: 30_000, unit: 'tokens' }];
}

/** small, with room for a call the allowance admits. */
function roomy(c: TestConfig): void {
  small(c);
  entry(c.tenants, 'support-bot').budgets = [{ window: 'month', limit: 10_000, unit: 'tokens' }];
}

/**
 * A call admitted on its count plus `allowances` times the 6,000 allowance (one per file or
 * tool): the provider billed no more than the prompt and the hold, the ledger has its bill, no
 * overrun. Returns the prompt it billed.
 */
async function billedWithinHold(
  s: Stack,
  r: Awaited<ReturnType<typeof post>>,
  allowances = 1,
): Promise<number> {
  expect(r.status).toBe(200);
  const prompt = Number(r.headers.get('x-holdfast-prompt-tokens'));
  expect(prompt).toBeGreaterThan(allowances * 6_000);
  const b = s.upstream.stats().billed;
  expect(b.promptTokens).toBeLessThanOrEqual(prompt);
  expect(b.promptTokens + b.completionTokens).toBeLessThanOrEqual(
    Number(r.headers.get('x-holdfast-held')),
  );
  const u = await s.settled('support-bot');
  expect(u.billedTokens).toBe(b.promptTokens + b.completionTokens);
  expect(u.overruns.count).toBe(0);
  return b.promptTokens;
}

const chatFile = (model: string) => ({
  model,
  max_tokens: 20,
  messages: [
    {
      role: 'user',
      content: [
        { type: 'text', text: 'Summarise this.' },
        { type: 'file', file: { filename: 'a.pdf', file_data: PDF } },
      ],
    },
  ],
});

async function nothingSpent(s: Stack): Promise<void> {
  const u = await s.settled('support-bot');
  expect(u.windows[0]).toMatchObject({ used: 0, held: 0 });
  expect(s.upstream.stats().recent).toHaveLength(0);
}

test('a file the edge cannot count is refused (chat, messages counted locally): a 400 naming it, nothing held or sent', async ({
  stack,
}) => {
  const s = await stack({ patch: small });
  const chat = await post(s, '/v1/chat/completions', chatFile('gpt-4o-mini'), auth);
  expect(chat.status).toBe(400);
  expect(chat.body.error).toMatchObject({
    code: 'invalid_request',
    param: 'messages.0.content.1',
  });
  expect(JSON.stringify(chat.body)).toContain('/v1/responses');
  const document = {
    type: 'document',
    source: { type: 'url', url: 'https://example.test/annual-report.pdf' },
  };
  const messages = await post(
    s,
    '/v1/messages',
    {
      model: 'claude-local',
      max_tokens: 20,
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Summarise this.' }, document] },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'read', input: {} }] },
      ],
    },
    { 'x-api-key': KEYS.support },
  );
  expect(messages.status).toBe(400);
  expect(messages.body).toMatchObject({
    type: 'error',
    error: { type: 'invalid_request_error' },
  });
  expect(JSON.stringify(messages.body)).toContain('messages.0.content.1');
  // Inside a tool result too.
  const inResult = await post(
    s,
    '/v1/messages',
    {
      model: 'claude-local',
      max_tokens: 20,
      messages: [
        {
          role: 'user',
          content: [{ type: 'tool_result', tool_use_id: 't1', content: [document] }],
        },
      ],
    },
    { 'x-api-key': KEYS.support },
  );
  expect(inResult.status).toBe(400);
  expect(JSON.stringify(inResult.body)).toContain('messages.0.content.0.content.0');
  await nothingSpent(s);
});

test('a file the upstream counts is held at its real size: Responses input_tokens, Messages count_tokens', async ({
  stack,
}) => {
  const s = await stack({ patch: small });
  // Responses: the upstream's input_tokens counts the file: 3,000+ does not fit 2,000.
  const responses = await post(s, '/v1/responses', responsesFile('gpt-4o-mini', PDF), auth);
  expect(responses.status).toBe(429);
  expect(responses.body.error).toMatchObject({ code: 'budget_exceeded' });
  expect(s.upstream.stats().requests.responsesInputTokens).toBe(1);
  // Messages on a model counted by the upstream's count_tokens: the same.
  const messages = await post(
    s,
    '/v1/messages',
    {
      model: CLAUDE,
      max_tokens: 20,
      messages: [
        {
          role: 'user',
          content: [
            {
              type: 'document',
              source: { type: 'base64', media_type: 'application/pdf', data: PDF.split(',')[1] },
            },
          ],
        },
      ],
    },
    { 'x-api-key': KEYS.support },
  );
  expect(messages.status).toBe(429);
  expect(s.upstream.stats().requests.responses ?? 0).toBe(0);
  expect(s.upstream.stats().requests.messages ?? 0).toBe(0);
  const u = await s.settled('support-bot');
  expect(u.windows[0]).toMatchObject({ used: 0, held: 0 });
});

test('with upstreamStateAllowanceTokens a chat file is admitted on its local count plus the allowance, and billed within it', async ({
  stack,
}) => {
  const s = await stack({ patch: roomy });
  const r = await post(s, '/v1/chat/completions', chatFile('gpt-files'), auth);
  expect(r.status).toBe(200);
  // The provider billed the file's pages (3,000) and the text: within the hold.
  expect(await billedWithinHold(s, r)).toBeGreaterThan(3_000);
});

test('the allowance is per file: three files are held three allowances, and billed within them', async ({
  stack,
}) => {
  const s = await stack({ patch: wide });
  const file = (name: string) => ({ type: 'file', file: { filename: name, file_data: PDF } });
  const body = {
    model: 'gpt-files',
    max_tokens: 20,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Compare these.' },
          file('a.pdf'),
          file('b.pdf'),
          file('c.pdf'),
        ],
      },
    ],
  };
  const r = await post(s, '/v1/chat/completions', body, auth);
  // 3 x 6,000 on top of the text (one allowance for the call held 6,000 for 9,000 of pages);
  // the provider billed the three files' pages (3 x 3,000) and the text: within the hold.
  expect(await billedWithinHold(s, r, 3)).toBeGreaterThan(9_000);
});

test('a tool the provider runs (web search, server tools, MCP) is refused: a 400 naming it, nothing held or sent; client-run tools go on', async ({
  stack,
}) => {
  const s = await stack({ patch: small });
  const search = await post(
    s,
    '/v1/responses',
    {
      model: 'gpt-4o-mini',
      max_output_tokens: 20,
      input: 'Find the latest annual report.',
      tools: [{ type: 'function', name: 'f', parameters: {} }, { type: 'web_search' }],
    },
    auth,
  );
  expect(search.status).toBe(400);
  expect(search.body.error).toMatchObject({ code: 'invalid_request', param: 'tools.1' });
  const claude = (extra: Record<string, unknown>) =>
    post(
      s,
      '/v1/messages',
      {
        model: CLAUDE,
        max_tokens: 20,
        messages: [{ role: 'user', content: 'Find it.' }],
        ...extra,
      },
      { 'x-api-key': KEYS.support },
    );
  const server = await claude({
    tools: [{ type: 'web_fetch_20250910', name: 'web_fetch', max_uses: 5 }],
  });
  expect(server.status).toBe(400);
  expect(JSON.stringify(server.body)).toContain('tools.0');
  const mcp = await claude({
    mcp_servers: [{ type: 'url', url: 'https://mcp.example.test/sse', name: 'docs' }],
  });
  expect(mcp.status).toBe(400);
  expect(JSON.stringify(mcp.body)).toContain('mcp_servers');
  await nothingSpent(s);
  // Tools the client runs are counted as their definitions, as before.
  const own = await claude({
    tools: [
      { name: 'lookup', input_schema: { type: 'object' } },
      { type: 'bash_20250124', name: 'bash' },
    ],
  });
  expect(own.status).toBe(200);
  const b = s.upstream.stats().billed;
  expect((await s.settled('support-bot')).billedTokens).toBe(b.promptTokens + b.completionTokens);
});

test('with upstreamStateAllowanceTokens a provider-run tool is admitted on its count plus the allowance', async ({
  stack,
}) => {
  // The provider searches once: it reads (and bills) a page of results per search.
  const s = await stack({ patch: roomy, behaviour: { toolUses: 1 } });
  const r = await post(
    s,
    '/v1/responses',
    {
      model: 'gpt-files',
      max_output_tokens: 20,
      input: 'Search.',
      tools: [{ type: 'web_search' }],
      max_tool_calls: 1,
    },
    auth,
  );
  // The provider billed what the search read (5,000) and the text: within the hold.
  expect(await billedWithinHold(s, r)).toBeGreaterThan(5_000);
});

test('the allowance is per document block, tool results included: two documents are held two allowances', async ({
  stack,
}) => {
  const s = await stack({ patch: wide });
  const document = (name: string) => ({
    type: 'document',
    source: { type: 'url', url: `https://example.test/${name}.pdf` },
  });
  const r = await post(
    s,
    '/v1/messages',
    {
      model: 'claude-files',
      max_tokens: 20,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Compare the report with what the tool found.' },
            document('annual-report'),
            { type: 'tool_result', tool_use_id: 't1', content: [document('found')] },
          ],
        },
      ],
    },
    { 'x-api-key': KEYS.support },
  );
  // 2 x 6,000 on top of the local count: the provider reads both documents' pages.
  expect(await billedWithinHold(s, r, 2)).toBeGreaterThan(6_000);
});

test('the allowance is per provider-run tool: two tools are held two allowances, and billed within them', async ({
  stack,
}) => {
  // Each tool is used once: the provider reads (and bills) a page of results per use.
  const s = await stack({ patch: wide, behaviour: { toolUses: 1 } });
  const r = await post(
    s,
    '/v1/responses',
    {
      model: 'gpt-files',
      max_output_tokens: 20,
      input: 'Search the web and our files.',
      tools: [{ type: 'web_search' }, { type: 'file_search', vector_store_ids: ['vs_1'] }],
      max_tool_calls: 2,
    },
    auth,
  );
  // 2 x 6,000 on top of the text (one allowance for the call held 6,000 for 10,000 of reads);
  // the provider billed what both tools read (2 x 5,000) and the text: within the hold.
  expect(await billedWithinHold(s, r, 2)).toBeGreaterThan(10_000);
});

test('the agent skills a Messages container loads are read by the provider: refused without an allowance, else held one allowance a skill and billed within it', async ({
  stack,
}) => {
  const skill = (id: string) => ({ type: 'anthropic', skill_id: id, version: 'latest' });
  const body = (model: string) => ({
    model,
    max_tokens: 20,
    messages: [{ role: 'user', content: 'Make the quarterly deck.' }],
    tools: [{ type: 'code_execution_20250825', name: 'code_execution' }],
    container: { skills: [skill('pptx'), skill('xlsx')] },
  });
  const headers = { 'x-api-key': KEYS.support };
  // Without an allowance the code execution tool is refused first; the skills say so on their
  // own when the tool is a client's.
  const s = await stack({ patch: wide });
  const refused = await post(s, '/v1/messages', { ...body(CLAUDE), tools: [] }, headers);
  expect(refused.status).toBe(400);
  expect(JSON.stringify(refused.body)).toContain('container.skills.0');
  await nothingSpent(s);
  // With it: the tool and each skill read once (3 x 5,000 billed), held 3 x 6,000.
  const r = await post(s, '/v1/messages', body('claude-files'), headers);
  expect(await billedWithinHold(s, r, 3)).toBeGreaterThan(15_000);
});

test("an image on a model counted by estimate is held at the upstream model's vision cost, not a flat 1,600", async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      small(c);
      // The config's default tokenizer (estimate) for a model that runs gpt-4o-mini.
      c.models.push({
        ...entry(c.models, 'gpt-4o-mini'),
        id: 'mini-estimate',
        tokenizer: 'estimate',
        upstreamModel: 'gpt-4o-mini',
      });
      const t = entry(c.tenants, 'support-bot');
      t.budgets = [{ window: 'month', limit: 60_000, unit: 'tokens' }];
      (t.useCases as { models: string[] }[])[0]!.models.push('mini-estimate');
    },
  });
  const image = { type: 'image_url', image_url: { url: 'https://example.test/receipt.png' } };
  const body = {
    model: 'mini-estimate',
    max_tokens: 20,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Total?' }, image] }],
  };
  const one = await post(s, '/v1/chat/completions', body, auth);
  expect(one.status).toBe(200);
  const b = s.upstream.stats().billed;
  // gpt-4o-mini bills an image of unknown size up to 2,833 + 8 x 5,667 tokens.
  expect(b.promptTokens).toBeGreaterThan(48_000);
  expect(Number(one.headers.get('x-holdfast-prompt-tokens'))).toBeGreaterThanOrEqual(
    b.promptTokens,
  );
  expect(b.promptTokens + b.completionTokens).toBeLessThanOrEqual(
    Number(one.headers.get('x-holdfast-held')),
  );
  // A second one does not fit what is left: refused before the model, never billed past 60,000.
  const two = await post(s, '/v1/chat/completions', body, auth);
  expect(two.status).toBe(429);
  const u = await s.settled('support-bot');
  expect(u.billedTokens).toBe(b.promptTokens + b.completionTokens);
  expect(u.windows[0]!.used).toBeLessThanOrEqual(60_000);
  expect(u.overruns.count).toBe(0);
});

/** small, with room for a prompt above 200,000 tokens. */
function huge(c: TestConfig): void {
  small(c);
  entry(c.tenants, 'support-bot').budgets = [{ window: 'month', limit: 1_000_000, unit: 'tokens' }];
}

test('the long-context beta with more than 200,000 input tokens on a model without price.longContext is refused (Anthropic bills it at long-context rates): a 400 naming the header, nothing held or sent', async ({
  stack,
}) => {
  const s = await stack({ patch: huge });
  const headers = { 'x-api-key': KEYS.support };
  const beta = { ...headers, 'anthropic-beta': 'prompt-caching-2024-07-31, Context-1M-2025-08-07' };
  // About 210,000 bytes of text: its bound is above the line, as its real count would be.
  const long = {
    model: 'claude-local',
    max_tokens: 20,
    messages: [{ role: 'user', content: 'lorem ipsum '.repeat(17_500) }],
  };
  for (const path of ['/v1/messages', '/v1/messages/count_tokens']) {
    const r = await post(s, path, long, beta);
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    expect(JSON.stringify(r.body)).toContain('anthropic-beta');
    expect(JSON.stringify(r.body)).toContain('200000');
  }
  await nothingSpent(s);
  // Without the beta the same prompt is no long-context request (Anthropic itself refuses one
  // above 200,000 without it; the mock takes it).
  const plain = await post(s, '/v1/messages', long, headers);
  expect(plain.status).toBe(200);
  // With the beta and a prompt under the line the call is billed at the standard rates.
  const short = await post(
    s,
    '/v1/messages',
    { ...long, messages: [{ role: 'user', content: 'Hi.' }] },
    beta,
  );
  expect(short.status).toBe(200);
  expect(s.upstream.stats().recent).toHaveLength(2);
  const b = s.upstream.stats().billed;
  expect((await s.settled('support-bot')).billedTokens).toBe(b.promptTokens + b.completionTokens);
});

test('the long-context beta above 200,000 on a model that prices longContext goes on, held at the long price; a priority tier without one is still refused', async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      huge(c);
      const m = entry(c.models, 'claude-local');
      m.price = {
        inputPerMTok: 3,
        outputPerMTok: 15,
        cachedInputPerMTok: 0.3,
        longContext: {
          aboveInputTokens: 200_000,
          inputPerMTok: 6,
          outputPerMTok: 22.5,
          cachedInputPerMTok: 0.6,
        },
        serviceTiers: { priority: { inputPerMTok: 6, outputPerMTok: 30 } },
      };
    },
  });
  const beta = { 'x-api-key': KEYS.support, 'anthropic-beta': 'context-1m-2025-08-07' };
  const long = {
    model: 'claude-local',
    max_tokens: 20,
    service_tier: 'standard_only',
    messages: [{ role: 'user', content: 'lorem ipsum '.repeat(17_500) }],
  };
  const r = await post(s, '/v1/messages', long, beta);
  expect(r.status).toBe(200);
  const prompt = Number(r.headers.get('x-holdfast-prompt-tokens'));
  expect(prompt).toBeGreaterThan(200_000);
  // Held at the long price: the prompt at its dearest input (a 1-hour cache write, 2 x $6)
  // and the output at $22.50 per MTok; the short price would hold 2 x $3 and $15.
  const heldMicro = Number(r.headers.get('x-holdfast-held-usd')) * 1e6;
  expect(heldMicro).toBeCloseTo(prompt * 12 + 20 * 22.5, 0);
  // Auto on a model that prices priority is held at priority, which has no long price.
  const priority = await post(s, '/v1/messages', { ...long, service_tier: 'auto' }, beta);
  expect(priority.status).toBe(400);
  expect(JSON.stringify(priority.body)).toContain('anthropic-beta');
  expect(s.upstream.stats().recent).toHaveLength(1);
});

test('audio on /v1/responses for a model with an audio price is refused (its usage does not split audio out): a 400 naming the part, nothing held or sent; a model without one goes on', async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      wide(c);
      c.models.push({
        ...entry(c.models, 'gpt-4o-mini'),
        id: 'gpt-audio',
        price: { inputPerMTok: 2.5, outputPerMTok: 10, audioInputPerMTok: 40 },
      });
      const uc = entry(
        entry(c.tenants, 'support-bot').useCases as { id: string; models: string[] }[],
        'UC-101',
      );
      uc.models.push('gpt-audio');
    },
  });
  const withAudio = (model: string) => ({
    model,
    max_output_tokens: 20,
    input: [
      { role: 'user', content: [{ type: 'input_text', text: 'What is said?' }] },
      {
        role: 'user',
        content: [
          { type: 'input_text', text: 'Here:' },
          { type: 'input_audio', input_audio: { data: 'UklGRiQAAABXQVZF', format: 'wav' } },
        ],
      },
    ],
  });
  const refused = await post(s, '/v1/responses', withAudio('gpt-audio'), auth);
  expect(refused.status).toBe(400);
  expect(refused.body.error).toMatchObject({ code: 'invalid_request', param: 'input.1.content.1' });
  expect(JSON.stringify(refused.body)).toContain('/v1/chat/completions');
  await nothingSpent(s);
  // Audio priced as text: billed as the text it is priced as.
  const text = await post(s, '/v1/responses', withAudio('gpt-4o-mini'), auth);
  expect(text.status).toBe(200);
});

test("a chat search model that bills its search content is held its allowance for each call's search: 8 workers never take a token budget past its limit", async ({
  stack,
}) => {
  const LIMIT_TOKENS = 30_000;
  const s = await stack({
    patch: (c) => {
      // OpenAI bills gpt-5-search-api's search results as input at the model's rate (the mock
      // 5,000 tokens a search); no count of the request sees them.
      c.models.push({
        id: 'gpt-5-search-api',
        upstream: 'default',
        tokenizer: 'o200k_base',
        searchModel: true,
        upstreamStateAllowanceTokens: 6_000,
        price: { inputPerMTok: 1.25, outputPerMTok: 10, toolUses: { web_search: 10 } },
      });
      const support = entry(c.tenants, 'support-bot');
      support.budgets = [{ window: 'month', limit: LIMIT_TOKENS, unit: 'tokens' }];
      const uc = entry(support.useCases as { id: string; models: string[] }[], 'UC-101');
      uc.models.push('gpt-5-search-api');
    },
  });
  const ask = (i: number) =>
    post(
      s,
      '/v1/chat/completions',
      {
        model: 'gpt-5-search-api',
        max_tokens: 50,
        messages: [{ role: 'user', content: `What changed in the budget report ${i}?` }],
      },
      auth,
    );
  // Before, each call was held its ~20 tokens and billed ~5,070: the first round of 8 was
  // served whole, the provider billing 40,528 tokens of the 30,000.
  const answers: Awaited<ReturnType<typeof post>>[] = [];
  for (let round = 0; round < 3; round++) {
    answers.push(...(await Promise.all(Array.from({ length: 8 }, (_, i) => ask(round * 8 + i)))));
  }
  const served = answers.filter((a) => a.status === 200);
  const refused = answers.filter((a) => a.status !== 200);
  const b = s.upstream.stats().billed;
  console.log(
    `[unseen] chat search content: served ${served.length}, refused ${refused.length}; the provider billed ${b.promptTokens + b.completionTokens} tokens of a ${LIMIT_TOKENS} budget`,
  );
  expect(served.length).toBeGreaterThan(0);
  expect(refused.length).toBeGreaterThan(0);
  for (const r of refused) expect(r.body.error).toMatchObject({ code: 'budget_exceeded' });
  for (const r of served) {
    expect(Number(r.headers.get('x-holdfast-prompt-tokens'))).toBeGreaterThan(6_000);
  }
  expect(b.promptTokens).toBeGreaterThan(served.length * 5_000);
  expect(b.promptTokens + b.completionTokens).toBeLessThanOrEqual(LIMIT_TOKENS);
  const u = await s.settled('support-bot');
  expect(u.billedTokens).toBe(b.promptTokens + b.completionTokens);
  expect(u.overruns.count).toBe(0);
  expect(u.windows[0]).toMatchObject({ held: 0 });
});
