import { createHash } from 'node:crypto';
import { compileConfig, HoldfastConfigSchema } from '@holdfast/config';
import { describe, expect, test } from 'vitest';
import type { Grant } from '../../call/adapter.js';
import { responsesAdapter } from './adapter.js';
import { asChatPrompt, referencedItems, unseenState } from './input.js';
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

  test('finds the input only the upstream can count, by path', () => {
    const param = (extra: object) =>
      unseenState(ResponsesRequest.parse({ model: 'm', ...extra }))[0]?.param ?? null;
    expect(param({ input: 'hi' })).toBeNull();
    expect(param({ previous_response_id: 'resp_1' })).toBe('previous_response_id');
    expect(param({ conversation: { id: 'conv_1' } })).toBe('conversation');
    expect(param({ prompt: { id: 'pmpt_1' } })).toBe('prompt');
    expect(param({ input: [{ type: 'item_reference', id: 'msg_1' }] })).toBe('input.0');
    // Its type may be left out (OpenAI's ItemReference): an id alone is one, not a message.
    expect(param({ input: [{ role: 'user', content: 'hi' }, { id: 'rs_1' }] })).toBe('input.1');
    expect(
      param({ input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file_1' }] }] }),
    ).toBe('input.0.content.0');
    // Inline too: a PDF is billed by its pages, which its bytes do not show.
    const inline = {
      type: 'input_file',
      filename: 'a.pdf',
      file_data: 'data:application/pdf;base64,JVBERi0=',
    };
    expect(param({ input: [{ role: 'user', content: [inline] }] })).toBe('input.0.content.0');
    const output = { type: 'function_call_output', call_id: 'c', output: [inline] };
    expect(param({ input: [{ role: 'user', content: 'hi' }, output] })).toBe('input.1.output.0');
  });

  test('reasoning the model reads back is counted upstream when sealed or stored by id; a summary alone here', () => {
    const found = (item: object) =>
      unseenState(
        ResponsesRequest.parse({ model: 'm', input: [{ role: 'user', content: 'q' }, item] }),
      );
    const summary = [{ type: 'summary_text', text: '' }];
    const sealed = found({ type: 'reasoning', id: 'rs_1', summary, encrypted_content: 'gAAAAAB' });
    expect(sealed).toEqual([
      expect.objectContaining({
        param: 'input.1',
        what: 'a reasoning item with encrypted_content',
      }),
    ]);
    expect(sealed[0]?.billed).toContain('whole reasoning');
    // Without content, an id names a reasoning item the provider keeps (store: true).
    expect(found({ type: 'reasoning', id: 'rs_1', summary })).toEqual([
      expect.objectContaining({ param: 'input.1', what: 'a reasoning item by id' }),
    ]);
    expect(found({ type: 'reasoning', id: 'rs_1', summary, encrypted_content: null })).toHaveLength(
      1,
    );
    // Nothing hidden: counted here, as its summary and reasoning text.
    expect(found({ type: 'reasoning', summary })).toEqual([]);
    // Any other sealed item (a compaction), and the items of tools the provider ran.
    expect(found({ type: 'compaction', id: 'cmp_1', encrypted_content: 'gAAAAAB' })).toEqual([
      expect.objectContaining({ param: 'input.1', what: 'an item with encrypted_content' }),
    ]);
    for (const type of [
      'web_search_call',
      'file_search_call',
      'image_generation_call',
      'mcp_call',
    ]) {
      expect(found({ type, id: 'x_1', status: 'completed' })[0]?.what).toBe(`a ${type} item`);
    }
    // Items the client's own tools made are all in the request.
    expect(found({ type: 'custom_tool_call', call_id: 'c', name: 'f', input: 'x' })).toEqual([]);
  });

  test('counts a reasoning item as its summary and reasoning text, a custom tool output as a tool message', () => {
    const body = ResponsesRequest.parse({
      model: 'm',
      input: [
        {
          type: 'reasoning',
          summary: [{ type: 'summary_text', text: 'Look it up. ' }],
          content: [{ type: 'reasoning_text', text: 'The ledger is in Redis.' }],
        },
        {
          type: 'custom_tool_call_output',
          call_id: 'c',
          output: [{ type: 'input_image', image_url: 'https://x/y.png', detail: 'high' }],
        },
      ],
    });
    expect(asChatPrompt(body, 'm').messages).toEqual([
      { role: 'assistant', content: 'Look it up. The ledger is in Redis.' },
      {
        role: 'tool',
        content: [{ type: 'image_url', image_url: { url: 'https://x/y.png', detail: 'high' } }],
      },
    ]);
  });

  test('finds the stored items the input reads by id (the authority checks whose they are)', () => {
    const body = ResponsesRequest.parse({
      model: 'gpt-4o-mini',
      input: [
        { type: 'item_reference', id: 'msg_1' },
        { id: 'msg_2' },
        { type: 'reasoning', id: 'rs_3', summary: [{ type: 'summary_text', text: 'x' }] },
        { type: 'reasoning', id: 'rs_4', summary: [], encrypted_content: 'sealed' },
        { type: 'message', id: 'msg_5' },
        { type: 'message', id: 'msg_6', role: 'assistant', content: 'shown' },
        { type: 'function_call', id: 'fc_7', call_id: 'c', name: 'f', arguments: '{}' },
        { role: 'user', content: 'hi' },
        { type: 'item_reference', id: 'msg_1' },
      ],
    });
    // With store on (its default), an item that carries its id with its content too: OpenAI
    // reads the id against what it stored.
    // Sealed content, by its digest, whatever store says: the provider opens any team's.
    const sealed = `ec_${createHash('sha256').update('sealed').digest('hex')}`;
    const all = ['msg_1', 'msg_2', 'rs_3', sealed, 'rs_4', 'msg_5', 'msg_6', 'fc_7'];
    expect(referencedItems(body)).toEqual(all);
    expect(referencedItems({ ...body, store: null })).toEqual(all);
    expect(responsesAdapter.asked(body).itemIds).toEqual(all);
    // store: false: only the items read by id alone, and the sealed content.
    const unstored = { ...body, store: false };
    expect(referencedItems(unstored)).toEqual(['msg_1', 'msg_2', 'rs_3', sealed, 'msg_5']);
    expect(referencedItems(ResponsesRequest.parse({ model: 'm', input: 'hi' }))).toEqual([]);
  });

  test('lists every piece, each of which gets the allowance', () => {
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
        { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: 'gAAAAAB' },
        { type: 'reasoning', id: 'rs_2', summary: [] },
      ],
    });
    expect(unseenState(body).map((u) => u.param)).toEqual([
      'previous_response_id',
      'input.0',
      'input.1.content.0',
      'input.1.content.1',
      'input.2',
      'input.3',
    ]);
  });
});
