import { beforeAll, describe, expect, it } from 'vitest';
import type { ChatPromptRequest } from '../types.js';
import type { FamilyCounter } from './family.js';
import { loadFamily } from './index.js';

/**
 * Tool-call arguments as vLLM renders them: it parses each call's `arguments` with Python's
 * `json.loads` and the template prints them with `json.dumps` (`| tojson`). Python keeps an
 * integer's every digit and a float's `.0`, where JavaScript's JSON.parse turned a 400-digit
 * integer into Infinity (rendered `null`, one token) and `1.0` into `1`: a client could send
 * thousands of prompt tokens the count did not see. The expected prompts below were rendered by
 * Python: jinja2 3.1 with transformers' `apply_chat_template` environment (trim_blocks,
 * lstrip_blocks, its `tojson`), arguments `json.loads`-ed as vLLM's `_postprocess_messages` does.
 */

const BIG = '7'.repeat(400);
const ARGS = `{"n": [1.0, 1e15, 1e-5, -0.0, -0, 1E5, 2.50, 1e400, 0.1], "big": ${BIG}, "s": "x"}`;
/** What Python prints for ARGS parsed. */
const PYTHON_ARGS = `{"n": [1.0, 1000000000000000.0, 1e-05, -0.0, 0, 100000.0, 2.5, Infinity, 0.1], "big": ${BIG}, "s": "x"}`;

const request = (args: string): ChatPromptRequest => ({
  model: 'm',
  messages: [
    { role: 'user', content: 'hi' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: args } }],
    },
    { role: 'tool', tool_call_id: 'call_1', content: 'ok' },
  ],
});

const RENDERED = {
  qwen3:
    '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<tool_call>\n' +
    `{"name": "f", "arguments": ${PYTHON_ARGS}}\n</tool_call><|im_end|>\n` +
    '<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
  llama3_1:
    '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n' +
    'Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>' +
    '<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>' +
    `<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "f", "parameters": ${PYTHON_ARGS}}<|eot_id|>` +
    '<|start_header_id|>ipython<|end_header_id|>\n\n"ok"<|eot_id|>' +
    '<|start_header_id|>assistant<|end_header_id|>\n\n',
} as const;

const f = {} as Record<keyof typeof RENDERED | 'deepseek_v3', FamilyCounter>;
beforeAll(() => {
  for (const name of Object.keys(RENDERED) as (keyof typeof RENDERED)[]) f[name] = loadFamily(name);
  f.deepseek_v3 = loadFamily('deepseek_v3');
}, 60_000);

describe('tool-call arguments are counted as Python prints the numbers in them', () => {
  for (const name of Object.keys(RENDERED) as (keyof typeof RENDERED)[]) {
    it(`${name}: the prompt vLLM renders, to the token`, () => {
      expect(f[name].render(request(ARGS))).toBe(RENDERED[name]);
      expect(f[name].countChat(request(ARGS))).toBe(f[name].vocab.countParsed(RENDERED[name]));
    });
  }

  it('a 4,300-digit integer (Python parses up to that) counts its digits, not one token', () => {
    const digits = '9'.repeat(4_300);
    const small = f.qwen3.countChat(request('{"a": 1}'));
    // Qwen gives each digit a token.
    expect(f.qwen3.countChat(request(`{"a": ${digits}}`))).toBe(small - 1 + 4_300);
  });

  it('numbers in tools print as Python prints what it parsed from the forwarded body', () => {
    // The edge forwards 1e-7 as JavaScript prints it ("1e-7"); vLLM parses it and prints 1e-07.
    const parameters = {
      type: 'object',
      properties: { x: { type: 'number', enum: [1e-7, 2.5e-9, 1e-7, 1e21, 3] } },
    };
    const tools = [{ type: 'function', function: { name: 'f', description: 'd', parameters } }];
    const chat: ChatPromptRequest = {
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      tools,
    };
    const rendered =
      '<|im_start|>system\n' +
      '# Tools\n' +
      '\n' +
      'You may call one or more functions to assist with the user query.\n' +
      '\n' +
      'You are provided with function signatures within <tools></tools> XML tags:\n' +
      '<tools>\n' +
      '{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object", "properties": {"x": {"type": "number", "enum": [1e-07, 2.5e-09, 1e-07, 1e+21, 3]}}}}}\n' +
      '</tools>\n' +
      '\n' +
      'For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n' +
      '<tool_call>\n' +
      '{"name": <function-name>, "arguments": <args-json-object>}\n' +
      '</tool_call><|im_end|>\n' +
      '<|im_start|>user\n' +
      'hi<|im_end|>\n' +
      '<|im_start|>assistant\n';
    expect(f.qwen3.render(chat)).toBe(rendered);
    expect(f.qwen3.countChat(chat)).toBe(f.qwen3.vocab.countParsed(rendered));
  });

  it("arguments a server renders as sent (llama.cpp, Qwen's template prints a string as is) count that way too", () => {
    // Escapes and whitespace that parsing takes out: llama.cpp hands the template the string.
    const args = `{"a": "${'\\u00e9'.repeat(20)}",${' \n'.repeat(40)}"b": 1}`;
    const turn = (printed: string) =>
      '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<tool_call>\n' +
      `{"name": "f", "arguments": ${printed}}\n</tool_call><|im_end|>\n` +
      '<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>\n<|im_start|>assistant\n';
    const asSent = f.qwen3.vocab.countParsed(turn(args));
    const parsed = f.qwen3.vocab.countParsed(turn(`{"a": "${'\u00e9'.repeat(20)}", "b": 1}`));
    expect(asSent).toBeGreaterThan(parsed);
    expect(f.qwen3.countChat(request(args))).toBe(asSent);
  });

  it("DeepSeek V3's template prints a call's arguments only as a string, with content null (llama.cpp): counted", () => {
    const args = `{"a": "${'x '.repeat(50)}"}`;
    // Rendered by Python (jinja2, transformers' environment) with the message llama.cpp sends.
    const rendered =
      '<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n' +
      `\`\`\`json\n${args}\n\`\`\`<｜tool▁call▁end｜>` +
      '<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>ok<｜tool▁output▁end｜><｜tool▁outputs▁end｜>';
    expect(f.deepseek_v3.countChat(request(args))).toBe(f.deepseek_v3.vocab.countParsed(rendered));
  });

  it('arguments that are not JSON, or carry the marker characters, are never counted under', () => {
    const odd = f.qwen3.countChat(request('{"a": 1.0, "b": "\uFDD20\uFDD3"}'));
    expect(odd).toBeGreaterThanOrEqual(
      f.qwen3.vocab.countParsed(f.qwen3.render(request('{"a": 1}'))),
    );
    const notJson = '{"a": 1e400,';
    expect(f.qwen3.countChat(request(notJson))).toBeGreaterThan(f.qwen3.countChat(request('{}')));
  });
});
