import { CLAUDE } from './rich-bodies.js';

/**
 * Request bodies as the SDKs send them (their keys in the SDK's order: openai-python puts
 * `messages` before `model`, anthropic-python sorts them; messages appended from a response
 * keep the response's order), for the fast body check's differential test and its bench.
 */

const weather = {
  type: 'object',
  properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['c', 'f'] } },
  required: ['city'],
  additionalProperties: false,
};

/** openai-python `chat.completions.create`: a tool round trip. */
export const CHAT_BODY = {
  messages: [
    { role: 'system', content: 'You are a helpful assistant.' },
    { role: 'user', content: 'What is the weather in Paris? Answer in one line.' },
    {
      content: null,
      refusal: null,
      role: 'assistant',
      annotations: [],
      tool_calls: [
        {
          id: 'call_abc123',
          function: { arguments: '{"city":"Paris"}', name: 'get_weather' },
          type: 'function',
        },
      ],
    },
    { role: 'tool', tool_call_id: 'call_abc123', content: '{"temp":18,"unit":"c"}' },
  ],
  model: 'gpt-4o-mini',
  max_completion_tokens: 256,
  stream: true,
  stream_options: { include_usage: true },
  temperature: 0.2,
  tool_choice: 'auto',
  tools: [
    {
      type: 'function',
      function: { name: 'get_weather', description: 'The weather', parameters: weather },
    },
  ],
};

/** openai-node `responses.create`: a function call and its output, then the next turn. */
export const RESPONSES_BODY = {
  model: 'gpt-4o-mini',
  instructions: 'You are a helpful assistant.',
  input: [
    { role: 'user', content: 'What is the weather in Paris?' },
    {
      id: 'fc_1',
      type: 'function_call',
      status: 'completed',
      arguments: '{"city":"Paris"}',
      call_id: 'call_1',
      name: 'get_weather',
    },
    { type: 'function_call_output', call_id: 'call_1', output: '{"temp":18}' },
    { role: 'user', content: [{ type: 'input_text', text: 'And tomorrow?' }] },
  ],
  tools: [
    {
      type: 'function',
      name: 'get_weather',
      description: 'The weather',
      parameters: weather,
      strict: true,
    },
  ],
  max_output_tokens: 512,
  reasoning: { effort: 'low' },
  store: false,
  stream: true,
};

/** anthropic-python `messages.create` (keys sorted): a cached system, a tool round trip. */
export const MESSAGES_BODY = {
  max_tokens: 1024,
  messages: [
    { role: 'user', content: 'What is the weather in Paris?' },
    {
      role: 'assistant',
      content: [
        { type: 'text', text: 'Let me look.' },
        { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { city: 'Paris' } },
      ],
    },
    {
      role: 'user',
      content: [
        {
          type: 'tool_result',
          tool_use_id: 'toolu_01',
          content: [{ type: 'text', text: '18 C, cloudy' }],
        },
      ],
    },
  ],
  model: CLAUDE,
  stream: true,
  system: [
    {
      type: 'text',
      text: 'You are a helpful assistant.',
      cache_control: { type: 'ephemeral' },
    },
  ],
  tools: [{ name: 'get_weather', description: 'The weather', input_schema: weather }],
};

export const SDK_BODIES: Array<[string, unknown]> = [
  ['/v1/chat/completions', CHAT_BODY],
  ['/v1/chat/completions', { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }],
  [
    '/v1/chat/completions',
    {
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is in this image?' },
            { type: 'image_url', image_url: { url: 'https://example.com/a.png', detail: 'auto' } },
          ],
        },
      ],
      model: 'gpt-4o',
      response_format: {
        type: 'json_schema',
        json_schema: { name: 'answer', schema: weather, strict: true },
      },
      n: 2,
      seed: 7,
      user: 'user-42',
    },
  ],
  ['/v1/responses', RESPONSES_BODY],
  ['/v1/responses', { model: 'gpt-4o-mini', input: 'Tell me a joke.' }],
  ['/v1/messages', MESSAGES_BODY],
  [
    '/v1/messages',
    {
      max_tokens: 16_000,
      messages: [{ role: 'user', content: 'Prove there are infinitely many primes.' }],
      model: CLAUDE,
      thinking: { type: 'enabled', budget_tokens: 10_000 },
      metadata: { user_id: 'user-42' },
    },
  ],
  [
    '/v1/messages/count_tokens',
    { messages: MESSAGES_BODY.messages, model: CLAUDE, system: 'Be brief.' },
  ],
  ['/v1/embeddings', { input: ['first text', 'second text'], model: 'text-embedding-3-small' }],
  [
    '/v1/embeddings',
    { input: [[1, 2, 3]], model: 'text-embedding-3-small', encoding_format: 'base64' },
  ],
];
