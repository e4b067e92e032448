import { HIDDEN_INPUT_TOKENS, type CompiledModel, type UpstreamConfig } from '@holdfast/config';
import { Err, Ok } from '@holdfast/runtime';
import { TokenCounter, type TokenizerName } from '@holdfast/tokenizer';
import { afterAll, describe, expect, test } from 'vitest';
import type { CountContext } from '../../call/adapter.js';
import type { CallDeps } from '../../call/deps.js';
import type { CountReply } from '../../upstream/counting.js';
import { countMessagesPrompt } from './adapter.js';
import { asChatPrompt } from './input.js';
import { MessagesRequest } from './schema.js';
import { hiddenInput, messagesProviderTools } from './hidden.js';

/** A model that sets no figure, and one whose newer prompt and computer tool are larger. */
const claude = {};
const next = { hiddenInputTokens: { toolUse: 1_600, computer: 3_000 } };
const D = HIDDEN_INPUT_TOKENS;
const custom = { name: 'lookup', input_schema: { type: 'object' } };
const bash = { type: 'bash_20250124', name: 'bash' };
const editor = { type: 'text_editor_20250728', name: 'str_replace_based_edit_tool' };
const computer = { type: 'computer_20251124', name: 'computer', display_width_px: 1024 };
const memory = { type: 'memory_20250818', name: 'memory' };

/** A prompt that offers these tools. */
const prompt = (tools?: { name: string; type?: string }[]) => ({ tools, messages: [] });

describe('the input a Messages request does not show', () => {
  test('the hidden input: the tool-use system prompt once tools are offered, each built-in tool its figure', () => {
    expect(hiddenInput(prompt(undefined), claude)).toBe(0);
    expect(hiddenInput(prompt([]), claude)).toBe(0);
    expect(hiddenInput(prompt([custom]), claude)).toBe(D.toolUse);
    expect(hiddenInput(prompt([{ ...custom, type: 'custom' }, custom]), claude)).toBe(D.toolUse);
    expect(hiddenInput(prompt([bash, editor, computer, memory]), claude)).toBe(
      D.toolUse + D.bash + D.textEditor + D.computer + D.memory,
    );
    // Two of a kind, two definitions; a model's raised figures; no model: the defaults.
    expect(hiddenInput(prompt([computer, computer]), next)).toBe(1_600 + 6_000);
    expect(hiddenInput(prompt([bash]), undefined)).toBe(D.toolUse + D.bash);
    // A lookalike type is no built-in tool (a server tool: refused or given the allowance).
    expect(hiddenInput(prompt([{ type: 'bash', name: 'bash' }]), claude)).toBe(D.toolUse);
    expect(hiddenInput(prompt([{ type: 'bash_2025-01', name: 'bash' }]), claude)).toBe(D.toolUse);
  });

  test('citations enabled anywhere (a document, a search result, one in a tool result): their prompt once', () => {
    const result = (enabled: boolean) => ({ type: 'search_result', citations: { enabled } });
    const user = (...content: object[]) => ({ messages: [{ role: 'user', content }] });
    expect(hiddenInput(user(result(false), { type: 'text', text: 'hi' }), claude)).toBe(0);
    expect(hiddenInput(user(result(true), result(true)), claude)).toBe(D.citations);
    const nested = { type: 'tool_result', content: [result(false), result(true)] };
    expect(hiddenInput(user(nested), claude)).toBe(D.citations);
    const doc = { type: 'document', source: {}, citations: { enabled: true } };
    expect(hiddenInput({ ...user({ type: 'text' }), system: [doc] }, claude)).toBe(D.citations);
    expect(hiddenInput({ ...user(doc), tools: [bash] }, claude)).toBe(
      D.citations + D.toolUse + D.bash,
    );
    expect(hiddenInput({ messages: [{ content: 'citations: { enabled: true }' }] }, claude)).toBe(
      0,
    );
    // Deeper than Anthropic nests blocks: not looked into, and no stack to exhaust.
    let deep: object = result(true);
    for (let i = 0; i < 200_000; i++) deep = { type: 'tool_result', content: [deep] };
    expect(hiddenInput(user(deep), claude)).toBe(0);
  });

  test('the provider runs any tool but the custom and built-in ones, and the MCP servers', () => {
    const tools = [custom, { ...custom, type: 'custom' }, bash, editor, computer, memory];
    expect(messagesProviderTools({ tools })).toEqual([]);
    const server = [
      { type: 'web_search_20250305', name: 'web_search', max_uses: 7 },
      { type: 'bash', name: 'bash' },
      { type: 'web_fetch_20250910', name: 'web_fetch' },
    ];
    // A search or a fetch reads on each use, up to its max_uses; the others once.
    expect(messagesProviderTools({ tools: [...tools, ...server], mcp_servers: [{}] })).toEqual([
      { param: 'tools.6', what: 'the web_search_20250305 server tool', counted: true, maxUses: 7 },
      { param: 'tools.7', what: 'the bash server tool', counted: false, maxUses: undefined },
      {
        param: 'tools.8',
        what: 'the web_fetch_20250910 server tool',
        counted: true,
        maxUses: undefined,
      },
      { param: 'mcp_servers', what: 'an MCP server', counted: false },
    ]);
    // Each skill a container loads reads once; a container named by its id alone reads nothing
    // (what code execution reads in it is that tool's).
    const skills = [
      { type: 'anthropic', skill_id: 'xlsx', version: 'latest' },
      { type: 'custom', skill_id: 'skill_01', version: 'latest' },
    ];
    expect(messagesProviderTools({ container: { id: 'c1', skills } })).toEqual([
      { param: 'container.skills.0', what: 'an agent skill', counted: false },
      { param: 'container.skills.1', what: 'an agent skill', counted: false },
    ]);
    expect(messagesProviderTools({ container: 'container_01' })).toEqual([]);
  });

  test('a custom tool that carries more than its name, description and schema counts as its JSON (input_examples: Anthropic bills them)', () => {
    const examples = [{ account: 'acct-1' }];
    const body = MessagesRequest.parse({
      model: 'claude',
      max_tokens: 10,
      messages: [{ role: 'user', content: 'hi' }],
      tools: [
        { ...custom, cache_control: { type: 'ephemeral' } },
        { ...custom, input_examples: examples, cache_control: { type: 'ephemeral' } },
        { ...custom, type: null, strict: true },
      ],
    });
    expect(asChatPrompt(body, 'm').tools).toEqual([
      {
        type: 'function',
        function: { name: 'lookup', description: null, parameters: { type: 'object' } },
      },
      { type: 'custom', ...custom, input_examples: examples },
      { type: 'custom', ...custom, strict: true },
    ]);
  });
});

describe('the Messages prompt count', () => {
  const counter = new TokenCounter({ poolSize: 1 });
  afterAll(() => counter.close());
  const body = MessagesRequest.parse({
    model: 'claude',
    max_tokens: 10,
    messages: [{ role: 'user', content: 'Open the report.' }],
    tools: [bash, computer],
  });
  /** The count with this tokenizer and, when given, what Anthropic's count_tokens answers. */
  const count = async (tokenizer: TokenizerName, upstream?: CountReply) => {
    const ctx: CountContext = {
      deps: {
        counter,
        upstream: { count: { messages: () => Promise.resolve(upstream) } },
      } as unknown as CallDeps,
      model: next as CompiledModel,
      tokenizer,
      target: upstream && ({ id: 'claude' } as UpstreamConfig),
      upstream: undefined,
      headers: {},
      serviceTier: 'default',
      owner: { tenant: 'team', signal: new AbortController().signal },
      countFor: { tenant: 'team' },
    };
    const counted = await countMessagesPrompt(body, ctx);
    if (!counted.ok) throw new Error(counted.error.message);
    return counted.value;
  };

  test('counted locally, it holds the hidden input on top of the chat count; count_tokens is taken as it is', async () => {
    const hidden = 1_600 + D.bash + 3_000;
    for (const tokenizer of ['estimate', 'o200k_base'] as const) {
      const chat = await counter.countChat(asChatPrompt(body, 'claude'), tokenizer);
      expect(await count(tokenizer)).toBe(chat + hidden);
      // tokenizer: upstream when count_tokens cannot answer: the same local count.
      const refused: CountReply = Err({ code: 'count_unreachable', status: null, message: 'x' });
      expect(await count(tokenizer, refused)).toBe(chat + hidden);
    }
    // Anthropic's count_tokens counts what it adds itself: exact, nothing added.
    expect(await count('estimate', Ok(2_345))).toBe(2_345);
  });
});
