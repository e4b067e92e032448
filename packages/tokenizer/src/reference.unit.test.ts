import { beforeAll, describe, expect, it } from 'vitest';
import { countChatPrompt } from './chat.js';
import { loadTokenizer, type Tokenizer } from './tokenizers.js';
import type { ChatPromptRequest, PromptMessage, PromptTool } from './types.js';
import { patchCount, tileCount, visionCostFor, imageTokensFor } from './vision.js';

/**
 * Counts that OpenAI (or its documentation) published. Each case names its source; the
 * prompt_tokens figures are the ones the OpenAI API returned in those sources.
 */

let o200k: Tokenizer;
let cl100k: Tokenizer;
beforeAll(async () => {
  [o200k, cl100k] = await Promise.all([loadTokenizer('o200k_base'), loadTokenizer('cl100k_base')]);
});

// Source: openai/openai-cookbook, examples/How_to_count_tokens_with_tiktoken.ipynb, section 6
// ("Counting tokens for chat completions API calls"): "124 prompt tokens counted by the OpenAI
// API" for gpt-4o and gpt-4o-mini, 129 for gpt-3.5-turbo, gpt-4-0613 and gpt-4.
const JARGON: PromptMessage[] = [
  {
    role: 'system',
    content:
      'You are a helpful, pattern-following assistant that translates corporate jargon into plain English.',
  },
  {
    role: 'system',
    name: 'example_user',
    content: 'New synergies will help drive top-line growth.',
  },
  {
    role: 'system',
    name: 'example_assistant',
    content: 'Things working well together will increase revenue.',
  },
  {
    role: 'system',
    name: 'example_user',
    content:
      "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage.",
  },
  {
    role: 'system',
    name: 'example_assistant',
    content: "Let's talk later when we're less busy about how to do better.",
  },
  {
    role: 'user',
    content:
      "This late pivot means we don't have time to boil the ocean for the client deliverable.",
  },
];

// Source: the same notebook, section 7 ("Counting tokens for chat completions with tool calls"):
// the OpenAI API reported 101 prompt tokens for gpt-4o and gpt-4o-mini, 105 for gpt-3.5-turbo
// and gpt-4.
const WEATHER_TOOLS: PromptTool[] = [
  {
    type: 'function',
    function: {
      name: 'get_current_weather',
      description: 'Get the current weather in a given location',
      parameters: {
        type: 'object',
        properties: {
          location: { type: 'string', description: 'The city and state, e.g. San Francisco, CA' },
          unit: {
            type: 'string',
            description: 'The unit of temperature to return',
            enum: ['celsius', 'fahrenheit'],
          },
        },
        required: ['location'],
      },
    },
  },
];
const WEATHER_MESSAGES: PromptMessage[] = [
  {
    role: 'system',
    content: 'You are a helpful assistant that can answer to questions about the weather.',
  },
  { role: 'user', content: "What's the weather like in San Francisco?" },
];

describe('prompt_tokens reported by the OpenAI API', () => {
  const chat = (model: string, extra: Partial<ChatPromptRequest> = {}): ChatPromptRequest => ({
    model,
    messages: JARGON,
    ...extra,
  });

  it.each(['gpt-4o', 'gpt-4o-mini'])('cookbook section 6, %s: 124', (model) => {
    expect(countChatPrompt(chat(model), o200k)).toBe(124);
  });

  it.each(['gpt-3.5-turbo', 'gpt-4-0613', 'gpt-4'])('cookbook section 6, %s: 129', (model) => {
    expect(countChatPrompt(chat(model), cl100k)).toBe(129);
  });

  it.each(['gpt-4o', 'gpt-4o-mini'])('cookbook section 7 (tools), %s: 101', (model) => {
    const request = chat(model, { messages: WEATHER_MESSAGES, tools: WEATHER_TOOLS });
    expect(countChatPrompt(request, o200k)).toBe(101);
  });

  it.each(['gpt-3.5-turbo', 'gpt-4'])('cookbook section 7 (tools), %s: 105', (model) => {
    const request = chat(model, { messages: WEATHER_MESSAGES, tools: WEATHER_TOOLS });
    expect(countChatPrompt(request, cl100k)).toBe(105);
  });

  it('counts the same tools passed as legacy `functions`', () => {
    const request = chat('gpt-4o', {
      messages: WEATHER_MESSAGES,
      functions: WEATHER_TOOLS.map((t) => t.function!),
    });
    expect(countChatPrompt(request, o200k)).toBe(101);
  });
});

describe('encodings, as tiktoken prints them', () => {
  // Source: the same notebook, sections 3 and 5 ("Comparing encodings").
  it.each([
    ['tiktoken is great!', 'o200k', 6],
    ['antidisestablishmentarianism', 'cl100k', 6],
    ['antidisestablishmentarianism', 'o200k', 6],
    ['2 + 2 = 4', 'cl100k', 7],
    ['2 + 2 = 4', 'o200k', 7],
    ['お誕生日おめでとう', 'cl100k', 9],
    ['お誕生日おめでとう', 'o200k', 8],
  ] as const)('%j in %s: %i tokens', (text, encoding, tokens) => {
    expect((encoding === 'o200k' ? o200k : cl100k).countText(text)).toBe(tokens);
  });
});

describe('image costs from OpenAI vision docs', () => {
  // Source: platform.openai.com/docs/guides/images-vision, "Calculating costs" (GPT-4o tile
  // scheme): 1024x1024 high = 765, 2048x4096 high = 1105, any size low = 85.
  const gpt4o = visionCostFor('gpt-4o');
  it('tiles: 1024x1024 high costs 765, 2048x4096 high 1105, low 85', () => {
    expect(tileCount({ width: 1024, height: 1024 })).toBe(4);
    expect(imageTokensFor(gpt4o, { width: 1024, height: 1024 }, 'high')).toBe(765);
    expect(imageTokensFor(gpt4o, { width: 2048, height: 4096 }, 'high')).toBe(1105);
    expect(imageTokensFor(gpt4o, { width: 4096, height: 8192 }, 'low')).toBe(85);
  });

  // Same page, patch scheme (gpt-4.1-mini, gpt-4.1-nano, o4-mini): 1024x1024 is 1024 patches;
  // 1800x2400 is scaled down to 1056x1408, 1452 patches.
  it('patches: 1024x1024 is 1024 patches, 1800x2400 is 1452', () => {
    expect(patchCount({ width: 1024, height: 1024 })).toBe(1024);
    expect(patchCount({ width: 1800, height: 2400 })).toBe(1452);
    expect(
      imageTokensFor(visionCostFor('gpt-4.1-mini'), { width: 1024, height: 1024 }, 'high'),
    ).toBe(Math.ceil(1024 * 1.62));
  });
});
