import { compileConfig, HoldfastConfigSchema } from '@holdfast/config';
import { describe, expect, test } from 'vitest';
import type { Grant } from '../../call/adapter.js';
import { messagesAdapter } from './adapter.js';
import { asChatPrompt } from './input.js';
import { MessagesRequest } from './schema.js';

const cfg = compileConfig(
  HoldfastConfigSchema.parse({
    upstreams: [{ id: 'c', api: 'anthropic', baseUrl: 'https://api.anthropic.com' }],
    models: [
      { id: 'claude', upstream: 'c', price: { inputPerMTok: 3, outputPerMTok: 15 } },
      {
        id: 'claude-priority',
        upstream: 'c',
        price: {
          inputPerMTok: 3,
          outputPerMTok: 15,
          serviceTiers: { priority: { inputPerMTok: 6, outputPerMTok: 30 } },
        },
      },
    ],
  }),
);
const grant = (maxOutput: number): Grant => ({
  model: cfg.models.get('claude')!,
  upstream: cfg.upstreams.get('c')!,
  maxOutput,
  choices: 1,
  promptTokens: 10,
});
const base = { model: 'claude', max_tokens: 8_000, messages: [{ role: 'user', content: 'hi' }] };

describe('the Messages adapter', () => {
  test('sends the grant as max_tokens, always streams, drops vendor fields, keeps a thinking budget below the grant', () => {
    const body = MessagesRequest.parse({
      ...base,
      thinking: { type: 'enabled', budget_tokens: 5_000 },
      n_predict: 9,
      max_tokens_to_sample: 9,
      metadata: { user_id: 'u-1' },
    });
    const { body: out, dropped } = messagesAdapter.upstreamBody(body, grant(2_048));
    expect(out).toEqual({
      model: 'claude',
      messages: base.messages,
      metadata: { user_id: 'u-1' },
      max_tokens: 2_048,
      stream: true,
      thinking: { type: 'enabled', budget_tokens: 2_047 },
      // No priority price: held at the standard price and sent as Anthropic serves it.
      service_tier: 'standard_only',
    });
    expect(dropped).toEqual(['n_predict', 'max_tokens_to_sample']);
    // A budget already below the grant is sent as it is.
    const small = MessagesRequest.parse({
      ...base,
      thinking: { type: 'enabled', budget_tokens: 1_500 },
    });
    expect(messagesAdapter.upstreamBody(small, grant(2_048)).body.thinking).toEqual(small.thinking);
    expect(messagesAdapter.asked(body)).toMatchObject({ maxOutput: 8_000, endUser: 'u-1' });
    expect(messagesAdapter.minOutput?.(body)?.tokens).toBe(1_025);
    expect(messagesAdapter.minOutput?.(MessagesRequest.parse(base))).toBeUndefined();
  });

  test('auto (or none) on a model without a priority price is sent as standard_only; priced, as asked', () => {
    const sent = (extra: object, model = 'claude') =>
      messagesAdapter.upstreamBody(MessagesRequest.parse({ ...base, ...extra }), {
        ...grant(2_048),
        model: cfg.models.get(model)!,
      }).body.service_tier;
    expect(sent({})).toBe('standard_only');
    expect(sent({ service_tier: null })).toBe('standard_only');
    expect(sent({ service_tier: 'auto' })).toBe('standard_only');
    expect(sent({ service_tier: 'standard_only' })).toBe('standard_only');
    // Held at the priority price: Anthropic may serve it there, as the client asked.
    expect(sent({}, 'claude-priority')).toBeUndefined();
    expect(sent({ service_tier: 'auto' }, 'claude-priority')).toBe('auto');
    expect(sent({ service_tier: 'standard_only' }, 'claude-priority')).toBe('standard_only');
  });

  test('max_tokens is required, as Anthropic requires it', () => {
    const r = MessagesRequest.safeParse({ model: 'claude', messages: base.messages });
    expect(r.success).toBe(false);
    expect(r.error?.issues[0]).toMatchObject({ path: ['max_tokens'], code: 'invalid_type' });
  });

  test('counts a prompt locally as the chat request it amounts to', () => {
    const body = MessagesRequest.parse({
      ...base,
      system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }],
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Weather?' },
            { type: 'image', source: { type: 'url', url: 'https://x/y.png' } },
          ],
        },
        {
          role: 'assistant',
          content: [{ type: 'tool_use', id: 't1', name: 'weather', input: { city: 'Oslo' } }],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 't1', content: 'rain' },
            { type: 'text', text: 'So?' },
          ],
        },
      ],
      tools: [
        { name: 'weather', input_schema: { type: 'object' } },
        { type: 'web_search_20250305', name: 'web_search' },
      ],
      tool_choice: { type: 'tool', name: 'weather' },
    });
    expect(asChatPrompt(body, 'm')).toEqual({
      model: 'm',
      messages: [
        { role: 'system', content: [{ type: 'text', text: 'Be brief.' }] },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Weather?' },
            { type: 'image_url', image_url: { url: 'https://x/y.png' } },
          ],
        },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            {
              id: 't1',
              type: 'function',
              function: { name: 'weather', arguments: '{"city":"Oslo"}' },
            },
          ],
        },
        { role: 'tool', tool_call_id: 't1', content: 'rain' },
        { role: 'user', content: [{ type: 'text', text: 'So?' }] },
      ],
      tools: [
        {
          type: 'function',
          function: { name: 'weather', description: null, parameters: { type: 'object' } },
        },
        { type: 'web_search_20250305', name: 'web_search' },
      ],
      tool_choice: { type: 'function', function: { name: 'weather' } },
    });
  });
});
