import { compileConfig, HoldfastConfigSchema } from '@holdfast/config';
import { describe, expect, test } from 'vitest';
import type { Grant } from '../../call/adapter.js';
import { responsesAdapter } from './adapter.js';
import { asChatPrompt, unseenState } from './input.js';
import { ResponsesRequest } from './schema.js';

const cfg = compileConfig(
  HoldfastConfigSchema.parse({
    upstreams: [{ id: 'u', baseUrl: 'http://127.0.0.1:1/v1' }],
    models: [
      {
        id: 'gpt-4o-mini',
        upstream: 'u',
        upstreamModel: 'gpt-4o-mini-2024',
        price: { inputPerMTok: 1, outputPerMTok: 1 },
      },
    ],
  }),
);
const grant: Grant = {
  model: cfg.models.get('gpt-4o-mini')!,
  upstream: cfg.upstreams.get('u')!,
  maxOutput: 300,
  choices: 1,
  promptTokens: 10,
};

describe('the Responses adapter', () => {
  test('sends the grant as max_output_tokens, always streams, drops vendor and unknown fields', () => {
    const body = ResponsesRequest.parse({
      model: 'gpt-4o-mini',
      input: 'hi',
      max_output_tokens: 4_096,
      n_predict: 9,
      max_tokens: 9,
      surprise: true,
      reasoning: { effort: 'low' },
    });
    const { body: out, dropped } = responsesAdapter.upstreamBody(body, grant);
    expect(out).toEqual({
      model: 'gpt-4o-mini-2024',
      input: 'hi',
      reasoning: { effort: 'low' },
      max_output_tokens: 300,
      stream: true,
    });
    expect(dropped).toEqual(['n_predict', 'max_tokens', 'surprise']);
    expect(responsesAdapter.asked(body)).toMatchObject({
      maxOutput: 4_096,
      choices: 1,
      stream: false,
    });
    expect(responsesAdapter.minOutput?.(body)?.tokens).toBe(16);
  });

  test('counts items as the chat request they amount to', () => {
    const body = ResponsesRequest.parse({
      model: 'gpt-4o-mini',
      instructions: 'Be brief.',
      input: [
        {
          role: 'user',
          content: [
            { type: 'input_text', text: 'Weather?' },
            { type: 'input_image', image_url: 'https://x/y.png', detail: 'low' },
          ],
        },
        { type: 'function_call', call_id: 'c1', name: 'weather', arguments: '{"city":"Oslo"}' },
        { type: 'function_call_output', call_id: 'c1', output: 'rain' },
        { type: 'reasoning', summary: [{ type: 'summary_text', text: 'It rains.' }] },
        { type: 'web_search_call', id: 'ws_1', status: 'completed' },
      ],
      tools: [{ type: 'function', name: 'weather', parameters: { type: 'object' } }],
      tool_choice: { type: 'function', name: 'weather' },
      text: { format: { type: 'json_schema', name: 'w', schema: { type: 'object' } } },
    });
    expect(asChatPrompt(body, 'm')).toEqual({
      model: 'm',
      messages: [
        { role: 'system', content: 'Be brief.' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Weather?' },
            { type: 'image_url', image_url: { url: 'https://x/y.png', detail: 'low' } },
          ],
        },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } },
          ],
        },
        { role: 'tool', content: 'rain' },
        { role: 'assistant', content: 'It rains.' },
        {
          role: 'user',
          content: JSON.stringify({ type: 'web_search_call', id: 'ws_1', status: 'completed' }),
        },
      ],
      tools: [
        {
          type: 'function',
          function: { name: 'weather', description: null, parameters: { type: 'object' } },
        },
      ],
      tool_choice: { type: 'function', function: { name: 'weather' } },
      response_format: {
        type: 'json_schema',
        json_schema: { name: 'w', schema: { type: 'object' } },
      },
    });
  });

  test('finds the state only the upstream can count', () => {
    const state = (extra: object) =>
      unseenState(ResponsesRequest.parse({ model: 'm', ...extra }))[0] ?? null;
    expect(state({ input: 'hi' })).toBeNull();
    expect(state({ previous_response_id: 'resp_1' })).toBe('previous_response_id');
    expect(state({ conversation: { id: 'conv_1' } })).toBe('conversation');
    expect(state({ prompt: { id: 'pmpt_1' } })).toBe('prompt');
    expect(state({ input: [{ type: 'item_reference', id: 'msg_1' }] })).toBe(
      'input[0] (item_reference)',
    );
    expect(
      state({ input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file_1' }] }] }),
    ).toBe('input[0] (a file only the upstream can count)');
    // Inline too: a PDF is billed by its pages, which its bytes do not show.
    const inline = {
      type: 'input_file',
      filename: 'a.pdf',
      file_data: 'data:application/pdf;base64,JVBERi0=',
    };
    expect(state({ input: [{ role: 'user', content: [inline] }] })).toBe(
      'input[0] (a file only the upstream can count)',
    );
  });

  test('lists every piece of state, each of which gets the allowance', () => {
    const body = ResponsesRequest.parse({
      model: 'm',
      previous_response_id: 'resp_1',
      input: [
        { type: 'item_reference', id: 'msg_1' },
        {
          role: 'user',
          content: [
            { type: 'input_file', file_id: 'file_1' },
            { type: 'input_file', file_id: 'file_2' },
          ],
        },
      ],
    });
    expect(unseenState(body)).toEqual([
      'previous_response_id',
      'input[0] (item_reference)',
      'input[1] (a file only the upstream can count)',
      'input[1] (a file only the upstream can count)',
    ]);
  });
});
