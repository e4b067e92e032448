import { describe, expect, it } from 'vitest';
import { call, useMockUpstream } from '../test/harness.js';

const mock = useMockUpstream();
const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Count me <|endoftext|> please.' },
];

describe('llama-server tokenizer endpoints', () => {
  it('renders the chat template and tokenizes it; a template model reports that count as prompt_tokens', async () => {
    const template = await call(mock.upstream(), 'POST', '/apply-template', { messages });
    expect(template.status).toBe(200);
    const prompt = (template.json as { prompt: string }).prompt;
    expect(prompt).toBe(
      '<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nCount me <|endoftext|> please.<|im_end|>\n<|im_start|>assistant\n',
    );
    const tokens = await call(mock.upstream(), 'POST', '/tokenize', { content: prompt });
    const count = (tokens.json as { tokens: number[] }).tokens.length;
    expect(count).toBeGreaterThan(20);
    const res = await mock.client().chat.completions.create({
      model: 'smollm2-135m-instruct',
      messages: messages as never,
      max_tokens: 4,
    });
    expect(res.usage?.prompt_tokens).toBe(count);
  });

  it('renders tools (and tool calls) as llama-server does, and bills them; messages alone undercount', async () => {
    const tools = [
      {
        type: 'function',
        function: {
          name: 'lookup_budget',
          description: 'The remaining budget of a team',
          parameters: { type: 'object', properties: { team: { type: 'string' } } },
        },
      },
    ];
    const conversation = [
      ...messages,
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            id: 'c1',
            type: 'function',
            function: { name: 'lookup_budget', arguments: '{"team":"a"}' },
          },
        ],
      },
      { role: 'tool', tool_call_id: 'c1', content: '210 tokens left' },
    ];
    const count = async (body: object) => {
      const { prompt } = (await call(mock.upstream(), 'POST', '/apply-template', body)).json as {
        prompt: string;
      };
      return {
        prompt,
        tokens: (
          (await call(mock.upstream(), 'POST', '/tokenize', { content: prompt })).json as {
            tokens: number[];
          }
        ).tokens.length,
      };
    };
    const full = await count({
      messages: conversation,
      tools,
      response_format: { type: 'json_object' },
    });
    expect(full.prompt).toContain('<tools>\n{"type":"function","function":{"name":"lookup_budget"');
    expect(full.prompt).toMatch(/^<\|im_start\|>system\nYou are terse\.\n\n# Tools/);
    expect(full.prompt).toContain(
      '<tool_call>\n{"name": "lookup_budget", "arguments": {"team":"a"}}\n</tool_call>',
    );
    expect(full.prompt).toContain(
      '<|im_start|>user\n<tool_response>\n210 tokens left\n</tool_response>',
    );
    const messagesOnly = await count({ messages: conversation });
    expect(messagesOnly.tokens).toBeLessThan(full.tokens - 50);

    const res = await call(mock.upstream(), 'POST', '/v1/chat/completions', {
      model: 'qwen3-8b',
      messages: conversation,
      tools,
      max_tokens: 4,
    });
    expect((res.json as { usage: { prompt_tokens: number } }).usage.prompt_tokens).toBe(
      full.tokens,
    );
  });

  it('answers 400 to a body it cannot read', async () => {
    expect((await call(mock.upstream(), 'POST', '/apply-template', { messages: 'x' })).status).toBe(
      400,
    );
    expect((await call(mock.upstream(), 'POST', '/tokenize', { content: 5 })).status).toBe(400);
  });
});
