import { describe, expect, it } from 'vitest';
import { anthropicClient, call, useMockUpstream } from '../test/harness.js';
import { SERVER_TOOL_INPUT_TOKENS } from './server-tools.js';

const mock = useMockUpstream();
const messages = [{ role: 'user' as const, content: 'What happened in the news today?' }];
const search = (max_uses?: number) => ({
  type: 'web_search_20250305' as const,
  name: 'web_search' as const,
  ...(max_uses === undefined ? {} : { max_uses }),
});

describe('provider-run tools billed per use', () => {
  it('Messages reports usage.server_tool_use, JSON and stream, within max_uses unless told not to', async () => {
    const claude = anthropicClient(mock.upstream());
    const create = (max_uses: number | undefined, headers: Record<string, string>) =>
      claude.messages.create(
        { model: 'claude-sonnet-4-5', max_tokens: 50, messages, tools: [search(max_uses)] },
        { headers },
      );
    const json = await create(5, { 'x-mock-tool-uses': '3' });
    expect(json.usage.server_tool_use).toEqual({ web_search_requests: 3, web_fetch_requests: 0 });
    expect((await create(2, { 'x-mock-tool-uses': '3' })).usage.server_tool_use).toMatchObject({
      web_search_requests: 2,
    });
    const over = await create(2, { 'x-mock-tool-uses': '3', 'x-mock-ignore-tool-bound': '1' });
    expect(over.usage.server_tool_use?.web_search_requests).toBe(3);
    const stream = claude.messages.stream(
      { model: 'claude-sonnet-4-5', max_tokens: 50, messages, tools: [search(4)] },
      { headers: { 'x-mock-tool-uses': '4' } },
    );
    expect((await stream.finalMessage()).usage.server_tool_use?.web_search_requests).toBe(4);
    // No tool billed per use: no server_tool_use.
    const plain = await claude.messages.create({
      model: 'claude-sonnet-4-5',
      max_tokens: 20,
      messages,
    });
    expect(plain.usage.server_tool_use ?? null).toBeNull();
    expect(
      mock
        .upstream()
        .stats()
        .recent.map((r) => r.toolUses),
    ).toEqual([{ web_search: 3 }, { web_search: 2 }, { web_search: 3 }, { web_search: 4 }, {}]);
  });

  it('Messages streams a server_tool_use block and its result per search, the counts in message_delta only', async () => {
    const res = await fetch(`${mock.upstream().url}/messages`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-api-key': 'sk-ant-test',
        'anthropic-version': '2023-06-01',
        'x-mock-tool-uses': '2',
      },
      body: JSON.stringify({
        model: 'claude-sonnet-4-5',
        max_tokens: 20,
        stream: true,
        messages,
        tools: [search(3)],
      }),
    });
    interface Event {
      type: string;
      message?: { usage: { server_tool_use?: unknown } };
      content_block?: { type: string; name?: string };
      usage?: { server_tool_use?: unknown };
    }
    const events = (await res.text())
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => JSON.parse(l.slice(6)) as Event);
    const start = events.find((e) => e.type === 'message_start');
    expect(start?.message?.usage.server_tool_use).toBeUndefined();
    const blocks = events.flatMap((e) =>
      e.content_block
        ? [[e.content_block.type, e.content_block.name].filter(Boolean).join(':')]
        : [],
    );
    expect(blocks).toEqual([
      'server_tool_use:web_search',
      'web_search_tool_result',
      'server_tool_use:web_search',
      'web_search_tool_result',
      'text',
    ]);
    const delta = events.find((e) => e.type === 'message_delta');
    expect(delta?.usage?.server_tool_use).toEqual({
      web_search_requests: 2,
      web_fetch_requests: 0,
    });
    const json = await anthropicClient(mock.upstream()).messages.create(
      { model: 'claude-sonnet-4-5', max_tokens: 20, messages, tools: [search(3)] },
      { headers: { 'x-mock-tool-uses': '1' } },
    );
    expect(json.content.map((b) => b.type)).toEqual([
      'server_tool_use',
      'web_search_tool_result',
      'text',
    ]);
  });

  it('Responses writes a *_call item per use, JSON and stream, max_tool_calls across tools', async () => {
    const openai = mock.client();
    const tools = [
      { type: 'web_search' as const },
      { type: 'file_search' as const, vector_store_ids: ['vs_1'] },
    ];
    const json = await openai.responses.create(
      { model: 'gpt-5', input: 'hi', max_output_tokens: 20, tools, max_tool_calls: 3 },
      { headers: { 'x-mock-tool-uses': '2' } },
    );
    expect(json.output.map((i) => i.type)).toEqual([
      'web_search_call',
      'web_search_call',
      'file_search_call',
      'message',
    ]);
    const events = await openai.responses.create(
      {
        model: 'gpt-5',
        input: 'hi',
        max_output_tokens: 20,
        tools,
        max_tool_calls: 3,
        stream: true,
      },
      { headers: { 'x-mock-tool-uses': '2', 'x-mock-ignore-tool-bound': '1' } },
    );
    const done: string[] = [];
    for await (const e of events) {
      if (e.type === 'response.output_item.done') done.push(e.item.type);
    }
    expect(done).toEqual([
      'web_search_call',
      'web_search_call',
      'file_search_call',
      'file_search_call',
      'message',
    ]);
    expect(
      mock
        .upstream()
        .stats()
        .recent.map((r) => r.toolUses),
    ).toEqual([
      { web_search: 2, file_search: 1 },
      { web_search: 2, file_search: 2 },
    ]);
  });

  it('Responses renders an image_generation_call item per image, JSON and stream, billed per image', async () => {
    const openai = mock.client();
    const ask = { model: 'gpt-5', input: 'draw', max_output_tokens: 20, max_tool_calls: 2 };
    const tools = [{ type: 'image_generation' as const }];
    const json = await openai.responses.create(
      { ...ask, tools },
      { headers: { 'x-mock-tool-uses': '3' } },
    );
    const images = json.output.filter((i) => i.type === 'image_generation_call');
    expect(images).toHaveLength(2);
    expect(images[0]).toMatchObject({ status: 'completed', result: expect.any(String) });
    const events = await openai.responses.create(
      { ...ask, tools, stream: true },
      { headers: { 'x-mock-tool-uses': '1' } },
    );
    const done: string[] = [];
    const progress: string[] = [];
    for await (const e of events) {
      if (e.type === 'response.output_item.done') done.push(e.item.type);
      if (e.type === 'response.output_item.added' && e.item.type === 'image_generation_call') {
        expect(e.item).not.toHaveProperty('result');
      }
      if (e.type.startsWith('response.image_generation_call.')) progress.push(e.type);
    }
    expect(done).toEqual(['image_generation_call', 'message']);
    expect(progress).toEqual([
      'response.image_generation_call.in_progress',
      'response.image_generation_call.generating',
      'response.image_generation_call.completed',
    ]);
    expect(
      mock
        .upstream()
        .stats()
        .recent.map((r) => r.toolUses),
    ).toEqual([{ image_generation: 2 }, { image_generation: 1 }]);
  });

  it('a stored prompt (pmpt_) carries the tools x-mock-stored-prompt-tools names, used within max_tool_calls', async () => {
    const openai = mock.client();
    const headers = {
      'x-mock-tool-uses': '2',
      'x-mock-stored-prompt-tools': 'web_search,image_generation',
    };
    const ask = { model: 'gpt-5', input: 'hi', max_output_tokens: 20, max_tool_calls: 3 };
    const json = await openai.responses.create({ ...ask, prompt: { id: 'pmpt_abc' } }, { headers });
    expect(json.output.map((i) => i.type)).toEqual([
      'web_search_call',
      'web_search_call',
      'image_generation_call',
      'message',
    ]);
    // The same request without a stored prompt uses no tool.
    await openai.responses.create(ask, { headers });
    expect(
      mock
        .upstream()
        .stats()
        .recent.map((r) => r.toolUses),
    ).toEqual([{ web_search: 2, image_generation: 1 }, {}]);
  });

  it('a Chat Completions search model (-search in its name) searches once a call, JSON and stream', async () => {
    const openai = mock.client();
    const ask = { messages, max_tokens: 20 };
    const json = await openai.chat.completions.create({
      model: 'gpt-4o-mini-search-preview',
      ...ask,
      web_search_options: { search_context_size: 'low' },
    });
    // Chat usage does not report the search (as OpenAI's does not).
    expect(Object.keys(json.usage ?? {})).not.toContain('server_tool_use');
    const stream = await openai.chat.completions.create({
      model: 'gpt-5-search-api',
      ...ask,
      stream: true,
    });
    for await (const _ of stream) void _;
    await openai.chat.completions.create({ model: 'gpt-4o-mini', ...ask });
    expect(
      mock
        .upstream()
        .stats()
        .recent.map((r) => r.toolUses),
    ).toEqual([{ web_search: 1 }, { web_search: 1 }, {}]);
    // The search results are input billed at the model's rate, free on the preview models.
    const [preview, api, plain] = mock.upstream().stats().recent;
    expect(preview!.promptTokens).toBe(plain!.promptTokens);
    expect(api!.promptTokens - plain!.promptTokens).toBe(SERVER_TOOL_INPUT_TOKENS);
  });

  it('refuses a bad x-mock-tool-uses', async () => {
    const res = await fetch(`${mock.upstream().url}/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-mock-tool-uses': '-1' },
      body: JSON.stringify({ model: 'gpt-5', input: 'hi' }),
    });
    expect(res.status).toBe(400);
  });
});

describe("provider-run tools' input billed per use", () => {
  /** What a create of `body` is billed as input above what its counting endpoint says. */
  async function unseen(
    path: '/v1/messages' | '/v1/responses',
    body: Record<string, unknown>,
    headers: Record<string, string>,
  ): Promise<number> {
    const h = { 'anthropic-version': '2023-06-01', ...headers };
    const countPath = path === '/v1/messages' ? `${path}/count_tokens` : `${path}/input_tokens`;
    const count = await call(mock.upstream(), 'POST', countPath, body, h);
    expect(count.status, JSON.stringify(count.json)).toBe(200);
    const max = path === '/v1/messages' ? { max_tokens: 20 } : { max_output_tokens: 20 };
    const created = await call(mock.upstream(), 'POST', path, { ...body, ...max }, h);
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    const { input_tokens } = count.json as { input_tokens: number };
    return mock.upstream().stats().recent.at(-1)!.promptTokens - input_tokens;
  }

  it('Messages: each search or fetch reads its results; code execution and an MCP server once', async () => {
    const claude = (tools: object[], extra: Record<string, unknown> = {}) => ({
      model: 'claude-sonnet-4-5',
      messages,
      tools,
      ...extra,
    });
    const uses = { 'x-mock-tool-uses': '4' };
    expect(await unseen('/v1/messages', claude([search(10)]), uses)).toBe(4 * 5_000);
    // The provider stops at max_uses: it reads no more than it searched.
    expect(await unseen('/v1/messages', claude([search(3)]), uses)).toBe(3 * 5_000);
    const fetchTool = { type: 'web_fetch_20250910', name: 'web_fetch', max_uses: 2 };
    expect(await unseen('/v1/messages', claude([search(10), fetchTool]), uses)).toBe(6 * 5_000);
    // No search made, nothing read.
    expect(await unseen('/v1/messages', claude([search(10)]), {})).toBe(0);
    const code = { type: 'code_execution_20250825', name: 'code_execution' };
    const mcp = { mcp_servers: [{ type: 'url', url: 'https://mcp.example.test', name: 'docs' }] };
    expect(await unseen('/v1/messages', claude([code], mcp), uses)).toBe(2 * 5_000);
    // Each skill a container loads is read once (its description, its files when used).
    const skills = { type: 'anthropic', skill_id: 'xlsx', version: 'latest' };
    const container = { container: { skills: [skills, { ...skills, skill_id: 'pptx' }] } };
    expect(await unseen('/v1/messages', claude([code], container), uses)).toBe(3 * 5_000);
    // The figure a use reads, by header or behaviour.
    const small = { ...uses, 'x-mock-tool-input-tokens': '700' };
    expect(await unseen('/v1/messages', claude([search(10), code]), small)).toBe(5 * 700);
    mock.upstream().configure({ toolInputTokens: 1_200 });
    expect(await unseen('/v1/messages', claude([search(10)]), uses)).toBe(4 * 1_200);
  });

  it('Responses: each tool call within max_tool_calls reads its results; a tool without counted calls once', async () => {
    const gpt = (tools: object[], max_tool_calls?: number) => ({
      model: 'gpt-5',
      input: 'What happened in the news today?',
      tools,
      ...(max_tool_calls === undefined ? {} : { max_tool_calls }),
    });
    const tools = [{ type: 'web_search' }, { type: 'file_search', vector_store_ids: ['vs_1'] }];
    const uses = { 'x-mock-tool-uses': '3' };
    expect(await unseen('/v1/responses', gpt(tools, 20), uses)).toBe(6 * 5_000);
    expect(await unseen('/v1/responses', gpt(tools, 4), uses)).toBe(4 * 5_000);
    const mcp = { type: 'mcp', server_label: 'docs', server_url: 'https://mcp.example.test' };
    expect(await unseen('/v1/responses', gpt([mcp, ...tools], 2), uses)).toBe(3 * 5_000);
    expect(await unseen('/v1/responses', gpt(tools), {})).toBe(0);
    // The client runs computer use and the local shell: the provider reads nothing for them.
    const clientRun = [
      {
        type: 'computer_use_preview',
        display_width: 1024,
        display_height: 768,
        environment: 'browser',
      },
      { type: 'local_shell' },
    ];
    expect(await unseen('/v1/responses', gpt(clientRun), uses)).toBe(0);
  });
});
