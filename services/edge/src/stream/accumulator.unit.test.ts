import { describe, expect, test } from 'vitest';
import { ChatAccumulator } from './accumulator.js';

/** One token per whitespace-separated word, for readable expectations. */
const words = (t: string) => t.split(/\s+/).filter(Boolean).length;

describe('ChatAccumulator', () => {
  test('assembles content, tool calls and finish reasons per choice, counting as it goes', () => {
    const acc = new ChatAccumulator(words, true);
    acc.add({
      id: 'c1',
      created: 1,
      model: 'm',
      choices: [{ index: 0, delta: { role: 'assistant', content: '' } }],
    });
    acc.add({
      choices: [
        { index: 0, delta: { content: 'hello there' } },
        { index: 1, delta: { content: 'hi' } },
      ],
    });
    acc.add({
      choices: [
        {
          index: 1,
          delta: {
            tool_calls: [
              {
                index: 0,
                id: 't1',
                type: 'function',
                function: { name: 'get', arguments: '{"a":' },
              },
            ],
          },
        },
      ],
    });
    acc.add({
      choices: [
        { index: 1, delta: { tool_calls: [{ index: 0, function: { arguments: ' 1}' } }] } },
      ],
    });
    acc.add({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
    // Each choice's text is counted joined: "hello there" and 'higet{"a": 1}'.
    expect(acc.counted).toBe(2 + 2);
    expect(acc.unfinished()).toEqual([1]);
    const c = acc.completion('fallback', 10, 'length');
    expect(c).toMatchObject({
      id: 'c1',
      object: 'chat.completion',
      model: 'm',
      choices: [
        { index: 0, message: { role: 'assistant', content: 'hello there' }, finish_reason: 'stop' },
        {
          index: 1,
          message: {
            content: 'hi',
            tool_calls: [
              { id: 't1', type: 'function', function: { name: 'get', arguments: '{"a": 1}' } },
            ],
          },
          finish_reason: 'length',
        },
      ],
      usage: { prompt_tokens: 10, completion_tokens: 4, total_tokens: 14 },
    });
  });

  test("the provider's usage wins when it is well-formed; the edge's count otherwise", () => {
    const acc = new ChatAccumulator(words, false);
    acc.add({ choices: [{ index: 0, delta: { content: 'a b c' } }] });
    expect(acc.usage(7)).toEqual({ promptTokens: 7, completionTokens: 3, cachedPromptTokens: 0 });
    acc.add({
      choices: [],
      usage: {
        prompt_tokens: 8,
        completion_tokens: 4,
        prompt_tokens_details: { cached_tokens: 99 },
      },
    });
    expect(acc.usage(7)).toEqual({ promptTokens: 8, completionTokens: 4, cachedPromptTokens: 8 });
    acc.add({ choices: [], usage: { prompt_tokens: -1, completion_tokens: 1.5 } });
    expect(acc.usage(7)).toEqual({ promptTokens: 7, completionTokens: 3, cachedPromptTokens: 0 });
  });

  test('output is counted in a few batches, only once it could pass the limit', () => {
    let calls = 0;
    const acc = new ChatAccumulator((t) => (calls++, words(t)), false);
    for (let i = 0; i < 1_000; i++) {
      acc.add({ choices: [{ index: 0, delta: { content: ' word' } }] });
      if (acc.overLimit(600)) break;
    }
    expect(acc.counted).toBe(601);
    expect(calls).toBeLessThan(40); // instead of 601, once per chunk
  });
});
