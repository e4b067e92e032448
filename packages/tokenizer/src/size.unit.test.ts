import { describe, expect, it } from 'vitest';
import { chatPromptChars, jsonChars } from './size.js';
import type { ChatPromptRequest, PromptContentPart } from './types.js';

const user = (content: PromptContentPart[]): ChatPromptRequest => ({
  model: 'gpt-4o',
  messages: [{ role: 'user', content }],
});

describe('chatPromptChars', () => {
  it('measures the parts counted as their JSON text (audio), not only text', () => {
    const data = 'A'.repeat(1_000_000);
    const audio = { type: 'input_audio', input_audio: { data, format: 'mp3' } };
    expect(chatPromptChars(user([audio as PromptContentPart]))).toBeGreaterThan(1_000_000);
    // A text field on another part type does not hide the rest of the part.
    const sneaky = { ...audio, text: 'hi' } as PromptContentPart;
    expect(chatPromptChars(user([sneaky]))).toBeGreaterThan(1_000_000);
  });

  it('weighs image data URLs by the header the counter decodes, at most', () => {
    const url = (n: number) => `data:image/png;base64,${'A'.repeat(n)}`;
    const image = (n: number): PromptContentPart => ({
      type: 'image_url',
      image_url: { url: url(n) },
    });
    const small = chatPromptChars(user([image(3_200)]));
    expect(small).toBe(Math.ceil(url(3_200).length / 32));
    expect(chatPromptChars(user([image(10_000_000)]))).toBe(Math.ceil(350_000 / 32));
  });

  it('measures names, refusals, tool calls, tools and a response format', () => {
    const request: ChatPromptRequest = {
      model: 'gpt-4o',
      messages: [
        {
          role: 'assistant',
          content: null,
          refusal: 'no',
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'f', arguments: 'x'.repeat(500) } },
          ],
        },
        { role: 'user', content: 'hello', name: 'ann' },
      ],
      tools: [
        { type: 'function', function: { name: 'f', parameters: { description: 'y'.repeat(700) } } },
      ],
      response_format: {
        type: 'json_schema',
        json_schema: { name: 's', schema: { d: 'z'.repeat(900) } },
      },
    };
    expect(chatPromptChars(request)).toBeGreaterThan(2 + 500 + 5 + 3 + 700 + 900);
  });
});

describe('jsonChars', () => {
  it('is about the length of the JSON text', () => {
    const value = { a: ['xyz', 12, null, { b: true }], c: 'hello' };
    const json = JSON.stringify(value).length;
    expect(jsonChars(value)).toBeGreaterThanOrEqual(json);
    expect(jsonChars(value)).toBeLessThan(json * 2);
  });

  it('walks any depth without overflowing the stack', () => {
    let deep: unknown = 'leaf';
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(jsonChars(deep)).toBeGreaterThan(200_000);
  });
});
