import { compileConfig, HoldfastConfigSchema } from '@holdfast/config';
import { describe, expect, test } from 'vitest';
import type { CountContext } from '../../call/adapter.js';
import { chatAdapter } from './adapter.js';
import { ChatRequest } from './schema.js';

const cfg = compileConfig(
  HoldfastConfigSchema.parse({
    upstreams: [{ id: 'o', baseUrl: 'https://api.openai.com/v1' }],
    models: [
      { id: 'voice', upstream: 'o', price: { inputPerMTok: 2.5, outputPerMTok: 10 } },
      {
        id: 'voice-allowed',
        upstream: 'o',
        price: { inputPerMTok: 2.5, outputPerMTok: 10 },
        upstreamStateAllowanceTokens: 2_000,
      },
    ],
  }),
);

/** A count context whose local count is 100 tokens and which has no counting upstream. */
const context = (model: string) =>
  ({
    deps: { counter: { countChat: () => Promise.resolve(100) } },
    model: cfg.models.get(model),
    tokenizer: 'o200k_base',
    target: undefined,
    upstream: cfg.upstreams.get('o'),
    headers: {},
  }) as unknown as CountContext;

// A voice conversation: the assistant's earlier audio reply comes back by id.
const body = ChatRequest.parse({
  model: 'voice',
  modalities: ['text', 'audio'],
  messages: [
    { role: 'user', content: 'Tell me a story.' },
    { role: 'assistant', audio: { id: 'audio_abc123' } },
    { role: 'user', content: 'Go on.' },
  ],
});

describe('the Chat Completions adapter and earlier audio replies', () => {
  test('an audio reply by id is input no count sees: a 400 without an allowance', async () => {
    const counted = await chatAdapter.countPrompt(body, context('voice'));
    expect(counted.ok).toBe(false);
    if (counted.ok) return;
    expect(counted.error).toMatchObject({ code: 'invalid_request', param: 'messages.1.audio' });
    expect(counted.error.message).toContain('bills the audio it refers to as audio input');
  });

  test('with upstreamStateAllowanceTokens it is held the allowance, at the audio input price', async () => {
    const counted = await chatAdapter.countPrompt(body, context('voice-allowed'));
    expect(counted).toEqual({ ok: true, value: 100 + 2_000 });
    expect(chatAdapter.asked(body)).toMatchObject({ audioInput: true, audioOutput: true });
  });
});
