import { APIError } from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { anthropicClient, call, useMockUpstream } from '../test/harness.js';

const mock = useMockUpstream();
const claude = () => anthropicClient(mock.upstream());

const base = {
  model: 'claude-sonnet-4-5',
  max_tokens: 200,
  system: 'You summarise incident reports.',
  messages: [
    { role: 'user' as const, content: 'Summarise: the nightly batch overran its budget by 12%.' },
  ],
};

describe('POST /v1/messages with the official client', () => {
  it('answers a message whose usage.input_tokens is what countTokens says for the same body', async () => {
    const client = claude();
    const message = await client.messages.create(base);
    const { input_tokens } = await client.messages.countTokens({
      model: base.model,
      system: base.system,
      messages: base.messages,
    });
    expect(message).toMatchObject({
      type: 'message',
      role: 'assistant',
      model: base.model,
      stop_reason: 'end_turn',
    });
    expect(message.usage).toMatchObject({
      input_tokens,
      output_tokens: 50,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
    });
    const block = message.content[0]!;
    expect(block.type === 'text' && block.text.split(' ')).toHaveLength(50);
    expect(mock.upstream().stats().recent[0]).toMatchObject({
      route: 'messages',
      promptTokens: input_tokens,
      completionTokens: 50,
      finishReason: 'end_turn',
    });
  });

  it('streams with messages.stream(...).finalMessage(), usage from message_delta', async () => {
    const stream = claude().messages.stream(
      { ...base, max_tokens: 12 },
      { headers: { 'x-mock-completion-tokens': '30' } },
    );
    const types: string[] = [];
    stream.on('streamEvent', (event) => types.push(event.type));
    const final = await stream.finalMessage();
    expect(final.stop_reason).toBe('max_tokens');
    expect(final.usage.output_tokens).toBe(12);
    // The client swallows pings; the raw stream below has one.
    expect(types).toEqual([
      'message_start',
      'content_block_start',
      ...Array<string>(12).fill('content_block_delta'),
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(mock.upstream().stats().usage.completionTokens).toBe(12);
    const raw = await call(
      mock.upstream(),
      'POST',
      '/v1/messages',
      { ...base, max_tokens: 2, stream: true },
      { 'anthropic-version': '2023-06-01' },
    );
    expect(raw.text.match(/^event: \S+/gm)).toEqual([
      'event: message_start',
      'event: content_block_start',
      'event: ping',
      'event: content_block_delta',
      'event: content_block_delta',
      'event: content_block_stop',
      'event: message_delta',
      'event: message_stop',
    ]);
  });

  it('requires max_tokens and anthropic-version, answering invalid_request_error', async () => {
    const err = await claude()
      .messages.create({ model: base.model, messages: base.messages } as never)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(APIError);
    expect((err as APIError).status).toBe(400);
    expect((err as APIError).error).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'max_tokens: Field required' },
    });
    const noVersion = await call(mock.upstream(), 'POST', '/v1/messages', base);
    expect(noVersion.status).toBe(400);
    expect(noVersion.json).toMatchObject({
      error: { message: 'anthropic-version: header is required' },
    });
  });

  it('reads the cache on the second call with the same cache_control prefix', async () => {
    mock.upstream().configure({ promptCacheMinTokens: 50 });
    const long = 'Budget policy. '.repeat(100);
    const body = {
      ...base,
      system: [
        {
          type: 'text' as const,
          text: long,
          cache_control: { type: 'ephemeral' as const, ttl: '1h' as const },
        },
      ],
      messages: [
        {
          role: 'user' as const,
          content: [
            {
              type: 'text' as const,
              text: 'First question',
              cache_control: { type: 'ephemeral' as const },
            },
          ],
        },
      ],
    };
    const client = claude();
    const { input_tokens: total } = await client.messages.countTokens(body);
    const first = await client.messages.create(body);
    expect(first.usage.cache_read_input_tokens).toBe(0);
    expect(first.usage.cache_creation!.ephemeral_1h_input_tokens).toBeGreaterThan(300);
    expect(first.usage.cache_creation!.ephemeral_5m_input_tokens).toBeGreaterThan(0);
    expect(first.usage.input_tokens + first.usage.cache_creation_input_tokens!).toBe(total);

    // A new question after the same system prompt: the system prefix is read back.
    const second = await client.messages.create({
      ...body,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Second question', cache_control: { type: 'ephemeral' } },
          ],
        },
      ],
    });
    expect(second.usage.cache_read_input_tokens).toBe(
      first.usage.cache_creation!.ephemeral_1h_input_tokens,
    );
    expect(second.usage.cache_creation).toMatchObject({ ephemeral_1h_input_tokens: 0 });
    const billed = mock.upstream().stats().recent[1]!;
    expect(billed.cachedTokens).toBe(second.usage.cache_read_input_tokens);
    expect(billed.promptTokens).toBe(
      second.usage.input_tokens +
        second.usage.cache_read_input_tokens! +
        second.usage.cache_creation_input_tokens!,
    );
  });

  it('writes nothing below the minimum cacheable length, and refuses five breakpoints', async () => {
    const cached = {
      type: 'text' as const,
      text: 'short',
      cache_control: { type: 'ephemeral' as const },
    };
    const res = await claude().messages.create({
      ...base,
      messages: [{ role: 'user', content: [cached] }],
    });
    expect(res.usage.cache_creation_input_tokens).toBe(0);
    const err = await claude()
      .messages.create({
        ...base,
        messages: [{ role: 'user', content: [cached, cached, cached, cached, cached] }],
      })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 400 });
  });

  it('calls the tool tool_choice forces, streaming input_json_delta', async () => {
    const tools = [
      {
        name: 'lookup_budget',
        description: 'Remaining budget',
        input_schema: { type: 'object' as const, properties: {} },
      },
    ];
    const client = claude();
    const withTools = await client.messages.countTokens({ ...base, tools });
    const without = await client.messages.countTokens({ ...base });
    expect(withTools.input_tokens - without.input_tokens).toBeGreaterThan(346);
    const stream = client.messages.stream({ ...base, tools, tool_choice: { type: 'any' } });
    const json: string[] = [];
    stream.on('inputJson', (partial) => json.push(partial));
    const final = await stream.finalMessage();
    expect(final.stop_reason).toBe('tool_use');
    const block = final.content[0]!;
    expect(block.type).toBe('tool_use');
    expect(block.type === 'tool_use' && block.input).toHaveProperty('input');
    const forced = await client.messages.countTokens({
      ...base,
      tools,
      tool_choice: { type: 'any' },
    });
    // The tool-use system prompt is 313 tokens when a tool is forced, 346 otherwise.
    expect(forced.input_tokens).toBe(withTools.input_tokens - 33);
    expect(final.usage.input_tokens).toBe(forced.input_tokens);
    expect(json.length).toBeGreaterThan(1);
  });

  it('stops at a stop sequence, thinks within max_tokens, and logs metadata.user_id', async () => {
    const client = claude();
    const free = await client.messages.create(base);
    const first = free.content[0]!;
    const text = first.type === 'text' ? first.text : '';
    const word = text.split(' ')[3]!;
    const stopped = await client.messages.create({ ...base, stop_sequences: [` ${word}`] });
    expect(stopped.stop_reason).toBe('stop_sequence');
    expect(stopped.stop_sequence).toBe(` ${word}`);
    expect(stopped.usage.output_tokens).toBeLessThan(50);

    const thought = await client.messages.create(
      {
        ...base,
        max_tokens: 2000,
        thinking: { type: 'enabled', budget_tokens: 1024 },
        metadata: { user_id: 'end-user-7' },
      },
      { headers: { 'x-mock-reasoning-tokens': '40' } },
    );
    expect(thought.content.map((b) => b.type)).toEqual(['thinking', 'text']);
    expect(thought.usage.output_tokens).toBe(90);
    expect(mock.upstream().stats().recent.at(-1)).toMatchObject({
      reasoningTokens: 40,
      endUser: 'end-user-7',
    });
  });
});
