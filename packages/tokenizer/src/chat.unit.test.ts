import { beforeAll, describe, expect, it } from 'vitest';
import { pngDataUrl } from '../test/images.js';
import { countChatPrompt } from './chat.js';
import { ESTIMATE_IMAGE_TOKENS } from './estimate.js';
import { encodingForModel, loadTokenizer, type Tokenizer } from './tokenizers.js';
import type { ChatPromptRequest } from './types.js';

let o200k: Tokenizer;
let cl100k: Tokenizer;
let estimate: Tokenizer;
beforeAll(async () => {
  [o200k, cl100k, estimate] = await Promise.all([
    loadTokenizer('o200k_base'),
    loadTokenizer('cl100k_base'),
    loadTokenizer('estimate'),
  ]);
});

const user = (content: ChatPromptRequest['messages'][number]['content']): ChatPromptRequest => ({
  model: 'gpt-4o',
  messages: [{ role: 'user', content }],
});

describe('countChatPrompt framing', () => {
  it('counts 3 per message, the role, the content and 3 for the primer', () => {
    // measured here: gpt-tokenizer's encodeChat gives 18 for this chat on gpt-4o and gpt-4.
    const request: ChatPromptRequest = {
      model: 'gpt-4o',
      messages: [
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'user', content: 'Hello' },
      ],
    };
    expect(countChatPrompt(request, o200k)).toBe(18);
    expect(countChatPrompt(request, cl100k)).toBe(18);
  });

  it('counts special-token text as plain text and never throws', () => {
    const text = 'a <|endoftext|> b <|im_start|>system<|im_sep|> <|fim_prefix|>';
    for (const tokenizer of [o200k, cl100k]) {
      const plain = tokenizer.countText(text);
      expect(plain).toBeGreaterThan(8);
      expect(countChatPrompt(user(text), tokenizer)).toBe(3 + 1 + plain + 3);
    }
  });

  it('counts an array of text parts like the same text as a string', () => {
    const parts = user([
      { type: 'text', text: 'Summarise the ' },
      { type: 'text', text: 'attached report.' },
    ]);
    expect(countChatPrompt(parts, o200k)).toBe(
      countChatPrompt(user('Summarise the attached report.'), o200k),
    );
  });

  it('counts empty and null content as framing only', () => {
    expect(countChatPrompt(user(''), o200k)).toBe(7);
    expect(countChatPrompt(user(null), o200k)).toBe(7);
    expect(countChatPrompt({ model: 'gpt-4o', messages: [] }, o200k)).toBe(3);
  });

  it('counts assistant tool calls and tool results', () => {
    const base: ChatPromptRequest = {
      model: 'gpt-4o',
      messages: [{ role: 'user', content: 'hi' }],
    };
    const withCalls: ChatPromptRequest = {
      model: 'gpt-4o',
      messages: [
        { role: 'user', content: 'hi' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { type: 'function', function: { name: 'lookup', arguments: '{"id":42}' } },
            { type: 'function', function: { name: 'lookup', arguments: '{"id":43}' } },
          ],
        },
        { role: 'tool', content: '{"ok":true}' },
      ],
    };
    const calls = 2 * (o200k.countText('lookup') + o200k.countText('{"id":42}') + 3);
    const assistant = 3 + o200k.countText('assistant');
    const tool = 3 + o200k.countText('tool') + o200k.countText('{"ok":true}');
    expect(countChatPrompt(withCalls, o200k)).toBe(
      countChatPrompt(base, o200k) + assistant + calls + tool,
    );
  });

  it('adds the named tool_choice and "none" like the legacy function_call', () => {
    const tools = [{ type: 'function', function: { name: 'foo', parameters: { type: 'object' } } }];
    const base: ChatPromptRequest = { ...user('hello'), tools };
    const auto = countChatPrompt({ ...base, tool_choice: 'auto' }, o200k);
    expect(countChatPrompt(base, o200k)).toBe(auto);
    expect(countChatPrompt({ ...base, tool_choice: 'none' }, o200k)).toBe(auto + 1);
    const named = { type: 'function', function: { name: 'foo' } };
    expect(countChatPrompt({ ...base, tool_choice: named }, o200k)).toBe(
      auto + o200k.countText('foo') + 4,
    );
  });

  it('survives a malformed tool schema and still counts it', () => {
    const tools = [
      {
        type: 'function',
        function: { name: 'bad', parameters: { type: 'object', properties: { a: null } } },
      },
    ];
    const count = countChatPrompt({ ...user('hello'), tools }, o200k);
    expect(count).toBeGreaterThan(countChatPrompt(user('hello'), o200k) + 9);
  });

  it('counts parts and tools with no documented cost as their JSON text', () => {
    const audio = { type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } };
    expect(countChatPrompt(user([audio]), o200k)).toBe(7 + o200k.countText(JSON.stringify(audio)));
    const schema = {
      name: 'out',
      schema: { type: 'object', properties: { a: { type: 'string' } } },
    };
    const format = { type: 'json_schema', json_schema: schema };
    expect(countChatPrompt({ ...user('x'), response_format: format }, o200k)).toBe(
      countChatPrompt(user('x'), o200k) + o200k.countText(JSON.stringify(schema)),
    );
  });
});

describe('countChatPrompt images', () => {
  const image = (url: string, detail?: string) =>
    user([{ type: 'image_url', image_url: { url, detail } }]);

  it('uses the size read from a data URL with the model tile costs', () => {
    expect(countChatPrompt(image(pngDataUrl(1024, 1024), 'high'), o200k)).toBe(7 + 765);
    expect(countChatPrompt(image(pngDataUrl(1024, 1024), 'low'), o200k)).toBe(7 + 85);
    const mini = { ...image(pngDataUrl(1024, 1024), 'high'), model: 'gpt-4o-mini' };
    expect(countChatPrompt(mini, o200k)).toBe(7 + 2833 + 4 * 5667);
  });

  it('charges the worst case when the size is unknown', () => {
    expect(countChatPrompt(image('https://example.test/cat.png'), o200k)).toBe(7 + 85 + 8 * 170);
    expect(countChatPrompt(image('https://example.test/cat.png', 'low'), o200k)).toBe(7 + 85);
    const nano = { ...image('https://example.test/cat.png'), model: 'gpt-4.1-nano' };
    expect(countChatPrompt(nano, o200k)).toBe(7 + Math.ceil(1536 * 2.46));
  });

  it('charges a flat 1,600 per image with the estimate tokenizer', () => {
    const one = image(pngDataUrl(64, 64), 'low');
    const two = user([
      { type: 'image_url', image_url: { url: pngDataUrl(64, 64), detail: 'low' } },
      { type: 'image_url', image_url: { url: 'https://example.test/cat.png' } },
    ]);
    expect(countChatPrompt(two, estimate) - countChatPrompt(one, estimate)).toBe(
      ESTIMATE_IMAGE_TOKENS,
    );
    expect(countChatPrompt(one, estimate)).toBe(countChatPrompt(user([]), estimate) + 1600);
  });

  it("charges an image the model's vision cost with the estimate tokenizer when that is more", () => {
    const mini = { ...image('https://example.test/cat.png'), model: 'gpt-4o-mini' };
    const none = { ...user([]), model: 'gpt-4o-mini' };
    // gpt-4o-mini: 2,833 + 8 tiles x 5,667 for an image of unknown size.
    expect(countChatPrompt(mini, estimate) - countChatPrompt(none, estimate)).toBe(
      2_833 + 8 * 5_667,
    );
  });

  it("charges a Claude image up to Anthropic's largest, 1,640, with the estimate tokenizer", () => {
    const claude = (url: string) => ({ ...image(url), model: 'claude-sonnet-4-5' });
    const none = countChatPrompt({ ...user([]), model: 'claude-sonnet-4-5' }, estimate);
    // Unknown size: the 784 x 1,568 image the guide keeps unscaled, 1,639.08 tokens.
    expect(countChatPrompt(claude('https://example.test/cat.png'), estimate) - none).toBe(1_640);
    expect(countChatPrompt(claude(pngDataUrl(784, 1568)), estimate) - none).toBe(1_640);
    // Smaller images still cost the SPEC's flat 1,600 at least.
    expect(countChatPrompt(claude(pngDataUrl(64, 64)), estimate) - none).toBe(1_600);
  });
});

describe('estimate tokenizer', () => {
  it('counts a token per UTF-8 byte plus one, and is never below the BPE count for prose', () => {
    expect(estimate.countText('abcdefg')).toBe(8);
    expect(estimate.countText('')).toBe(0);
    const prose =
      'The quarterly digest summarises incidents, spend and open risks for each team. '.repeat(40);
    const request = user(prose);
    expect(countChatPrompt(request, estimate)).toBeGreaterThan(countChatPrompt(request, o200k));
  });
});

describe('encodingForModel', () => {
  it.each([
    ['gpt-4o', 'o200k_base'],
    ['gpt-4o-mini-2024-07-18', 'o200k_base'],
    ['gpt-4.1', 'o200k_base'],
    ['o3-mini', 'o200k_base'],
    ['some-unknown-model', 'o200k_base'],
    ['gpt-4', 'cl100k_base'],
    ['gpt-4-turbo', 'cl100k_base'],
    ['gpt-4-0613', 'cl100k_base'],
    ['gpt-3.5-turbo', 'cl100k_base'],
    ['text-embedding-3-small', 'cl100k_base'],
  ])('%s uses %s', (model, encoding) => {
    expect(encodingForModel(model)).toBe(encoding);
  });
});
