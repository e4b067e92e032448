import type { ChatPromptRequest, PromptMessage, PromptTool } from './types.js';

/**
 * Chat requests whose prompt_tokens the OpenAI API reported in a published source. The
 * tokenizer's tests check countChatPrompt against them; the mock upstream and the edge can
 * replay them end to end.
 */
export interface ReferenceCase {
  source: string;
  request: ChatPromptRequest;
  encoding: 'o200k_base' | 'cl100k_base';
  /** usage.prompt_tokens as the OpenAI API returned it. */
  promptTokens: number;
}

const COOKBOOK = 'openai/openai-cookbook examples/How_to_count_tokens_with_tiktoken.ipynb';

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

export const REFERENCE_CASES: readonly ReferenceCase[] = [
  ...(['gpt-4o', 'gpt-4o-mini'] as const).map((model) => ({
    source: `${COOKBOOK}, section 6`,
    request: { model, messages: JARGON },
    encoding: 'o200k_base' as const,
    promptTokens: 124,
  })),
  ...(['gpt-3.5-turbo', 'gpt-4-0613', 'gpt-4'] as const).map((model) => ({
    source: `${COOKBOOK}, section 6`,
    request: { model, messages: JARGON },
    encoding: 'cl100k_base' as const,
    promptTokens: 129,
  })),
  ...(['gpt-4o', 'gpt-4o-mini'] as const).map((model) => ({
    source: `${COOKBOOK}, section 7`,
    request: { model, messages: WEATHER_MESSAGES, tools: WEATHER_TOOLS },
    encoding: 'o200k_base' as const,
    promptTokens: 101,
  })),
  ...(['gpt-3.5-turbo', 'gpt-4'] as const).map((model) => ({
    source: `${COOKBOOK}, section 7`,
    request: { model, messages: WEATHER_MESSAGES, tools: WEATHER_TOOLS },
    encoding: 'cl100k_base' as const,
    promptTokens: 105,
  })),
];
