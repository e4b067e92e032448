import { describe, expect, it } from 'vitest';
import { call, useMockUpstream } from '../../test/harness.js';
import type OpenAI from 'openai';
import { countOpenWeight, renderOpenWeight } from './index.js';
import { dumps, loads } from './python-json.js';

/**
 * The mock as a vLLM server running Qwen 3. The expected texts are what Python printed:
 * json.dumps(json.loads(text), ensure_ascii=False), and the model's chat_template rendered
 * with jinja2 3.1.6 and transformers' tojson over the request as vLLM maps it.
 */
const mock = useMockUpstream();

describe('python-json', () => {
  it('reads and prints numbers as Python does, strings with ensure_ascii off', () => {
    const text =
      '{"a": 1.0, "b": 1e-7, "c": 12345678901234567890123, "d": 1e16, "e": 123.456, "f": -0.0, "g": "é\\n\\"\\u0001", "h": 1e400, "i": 1e3, "j": -0, "k": 0.0001, "l": 0.00001, "m": 1e15, "n": [true, false, null], "o": {}, "p": 5e-324, "q": 1.7976931348623157e308}';
    expect(dumps(loads(text))).toBe(
      '{"a": 1.0, "b": 1e-07, "c": 12345678901234567890123, "d": 1e+16, "e": 123.456, "f": -0.0, "g": "é\\n\\"\\u0001", "h": Infinity, "i": 1000.0, "j": 0, "k": 0.0001, "l": 1e-05, "m": 1000000000000000.0, "n": [true, false, null], "o": {}, "p": 5e-324, "q": 1.7976931348623157e+308}',
    );
  });

  it('refuses what is not JSON', () => {
    for (const text of ["{'a': 1}", '[1,]', '01', '1 2', '']) expect(() => loads(text)).toThrow();
  });
});

/** A conversation with tools, parallel tool calls with numbers, tool results and text parts. */
const REQUEST = {
  messages: [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Move the arm.' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        {
          id: 'c1',
          type: 'function',
          function: {
            name: 'move',
            arguments:
              '{"steps": 12345678901234567890123, "speed": 1.0, "tol": 1e-7, "label": "été"}',
          },
        },
        {
          id: 'c2',
          type: 'function',
          function: { name: 'move', arguments: '{"steps":2,"speed":0.5,"tol":1E-9}' },
        },
      ],
    },
    { role: 'tool', tool_call_id: 'c1', content: 'ok' },
    { role: 'tool', tool_call_id: 'c2', content: 'ok 2' },
    {
      role: 'assistant',
      content: 'Moved.',
      tool_calls: [
        {
          id: 'c3',
          type: 'function',
          function: { name: 'move', arguments: '{"steps": 0, "speed": 100.0}' },
        },
      ],
    },
    { role: 'tool', tool_call_id: 'c3', content: 'done' },
    {
      role: 'user',
      content: [
        { type: 'text', text: 'And now?' },
        { type: 'text', text: 'Quickly.' },
      ],
    },
  ],
  tools: [
    {
      type: 'function',
      function: {
        name: 'move',
        description: 'Move the arm.',
        parameters: {
          type: 'object',
          properties: {
            steps: { type: 'integer', minimum: 0, maximum: 1e22 },
            speed: { type: 'number', minimum: 0.5, multipleOf: 1e-7, default: 1.5 },
          },
          required: ['steps'],
        },
      },
    },
  ],
};

/** What jinja2 rendered (the tools' 1e22 reaches the server from JSON.stringify as 1e+22). */
const RENDERED = [
  '<|im_start|>system\n',
  'You are terse.\n',
  '\n',
  '# Tools\n',
  '\n',
  'You may call one or more functions to assist with the user query.\n',
  '\n',
  'You are provided with function signatures within <tools></tools> XML tags:\n',
  '<tools>\n',
  '{"type": "function", "function": {"name": "move", "description": "Move the arm.", "parameters": {"type": "object", "properties": {"steps": {"type": "integer", "minimum": 0, "maximum": 1e+22}, "speed": {"type": "number", "minimum": 0.5, "multipleOf": 1e-07, "default": 1.5}}, "required": ["steps"]}}}\n',
  '</tools>\n',
  '\n',
  'For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n',
  '<tool_call>\n',
  '{"name": <function-name>, "arguments": <args-json-object>}\n',
  '</tool_call><|im_end|>\n',
  '<|im_start|>user\n',
  'Move the arm.<|im_end|>\n',
  '<|im_start|>assistant\n',
  '<tool_call>\n',
  '{"name": "move", "arguments": {"steps": 12345678901234567890123, "speed": 1.0, "tol": 1e-07, "label": "été"}}\n',
  '</tool_call>\n',
  '<tool_call>\n',
  '{"name": "move", "arguments": {"steps": 2, "speed": 0.5, "tol": 1e-09}}\n',
  '</tool_call><|im_end|>\n',
  '<|im_start|>user\n',
  '<tool_response>\n',
  'ok\n',
  '</tool_response>\n',
  '<tool_response>\n',
  'ok 2\n',
  '</tool_response><|im_end|>\n',
  '<|im_start|>assistant\n',
  'Moved.\n',
  '<tool_call>\n',
  '{"name": "move", "arguments": {"steps": 0, "speed": 100.0}}\n',
  '</tool_call><|im_end|>\n',
  '<|im_start|>user\n',
  '<tool_response>\n',
  'done\n',
  '</tool_response><|im_end|>\n',
  '<|im_start|>user\n',
  'And now?\n',
  'Quickly.<|im_end|>\n',
  '<|im_start|>assistant\n',
].join('');

describe('qwen3 as vLLM renders it', () => {
  it('renders the chat template as jinja2 does', () => {
    expect(renderOpenWeight('qwen3', REQUEST)).toBe(RENDERED);
  });

  it('bills the model configured as qwen3 with that count; others keep theirs', async () => {
    const put = await call(mock.upstream(), 'PUT', '/_mock/config', {
      openWeight: { 'qwen3-8b': 'qwen3' },
    });
    expect(put.status).toBe(200);
    const count = countOpenWeight('qwen3', REQUEST);
    const ask = (model: string) =>
      mock.client().chat.completions.create({
        ...(REQUEST as unknown as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming),
        model,
        max_tokens: 4,
      });
    expect((await ask('qwen3-8b')).usage?.prompt_tokens).toBe(count);
    // The same name not configured: the ChatML-like o200k count of template.ts.
    expect((await ask('qwen3-14b')).usage?.prompt_tokens).not.toBe(count);
  });
});
