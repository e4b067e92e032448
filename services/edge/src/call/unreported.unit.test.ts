import { describe, expect, test } from 'vitest';
import { longestCacheLifetime, unreportedUsage, type UnreportedCall } from './unreported.js';

const none = () => undefined;
const call = (over: Partial<UnreportedCall> = {}): UnreportedCall => ({
  asked: { model: 'm', maxOutput: 100, choices: 1, stream: true, endUser: null },
  promptTokens: 500,
  maxOutput: 100,
  model: {},
  ...over,
});

describe('unreportedUsage', () => {
  test('a plain call: its prompt and the output the edge counted', () => {
    expect(unreportedUsage(call(), 7, undefined, none)).toMatchObject({
      promptTokens: 500,
      completionTokens: 7,
      audioPromptTokens: 0,
      audioCompletionTokens: 0,
      cacheWrite5mTokens: 0,
      cacheWrite1hTokens: 0,
    });
  });

  test('a reasoning model, or a call asking for reasoning: the admitted output, the unseen part as reasoning', () => {
    expect(unreportedUsage(call({ model: { reasoning: true } }), 7, undefined, none)).toMatchObject(
      {
        completionTokens: 100,
        reasoningTokens: 93,
      },
    );
    const asked = { ...call().asked, reasoning: true };
    expect(unreportedUsage(call({ asked }), 0, undefined, none)).toMatchObject({
      completionTokens: 100,
      reasoningTokens: 100,
    });
    // More seen than admitted (an upstream past max_tokens): what was seen.
    expect(unreportedUsage(call({ asked }), 120, undefined, none)).toMatchObject({
      completionTokens: 120,
      reasoningTokens: 0,
    });
  });

  test('audio sent: the prompt as audio; audio asked: the admitted output as audio', () => {
    const asked = { ...call().asked, audioInput: true, audioOutput: true };
    expect(unreportedUsage(call({ asked }), 7, undefined, none)).toMatchObject({
      promptTokens: 500,
      audioPromptTokens: 500,
      completionTokens: 100,
      audioCompletionTokens: 100,
    });
  });

  test('cache marks: the prompt as a write of the longest lifetime, unless the provider said', () => {
    expect(unreportedUsage(call(), 0, undefined, () => '1h')).toMatchObject({
      cacheWrite1hTokens: 500,
    });
    expect(unreportedUsage(call(), 0, undefined, () => '5m')).toMatchObject({
      cacheWrite5mTokens: 500,
      cacheWrite1hTokens: 0,
    });
    const reported = {
      promptTokens: 480,
      cachedPromptTokens: 400,
      cacheWrite5mTokens: 0,
      cacheWrite1hTokens: 30,
    };
    let read = false;
    const writes = () => {
      read = true;
      return '1h' as const;
    };
    expect(unreportedUsage(call(), 3, reported, writes)).toMatchObject({
      ...reported,
      completionTokens: 3,
    });
    expect(read).toBe(false);
  });
});

describe('longestCacheLifetime', () => {
  test('none, 5 minutes by default, 1 hour wherever it is marked', () => {
    expect(longestCacheLifetime({ messages: [{ role: 'user', content: 'hi' }] })).toBeUndefined();
    expect(
      longestCacheLifetime({
        system: [{ type: 'text', text: 's', cache_control: { type: 'ephemeral' } }],
      }),
    ).toBe('5m');
    expect(
      longestCacheLifetime({
        system: [{ type: 'text', text: 's', cache_control: { type: 'ephemeral' } }],
        messages: [
          {
            role: 'user',
            content: [
              {
                type: 'tool_result',
                tool_use_id: 't',
                content: [
                  { type: 'text', text: 'x', cache_control: { type: 'ephemeral', ttl: '1h' } },
                ],
              },
            ],
          },
        ],
      }),
    ).toBe('1h');
    expect(
      longestCacheLifetime({
        tools: [{ name: 'f', cache_control: { type: 'ephemeral', ttl: '5m' } }],
      }),
    ).toBe('5m');
    expect(longestCacheLifetime({ cache_control: null, x: 'cache_control' })).toBeUndefined();
  });

  test('a deep body does not overflow the stack', () => {
    let deep: unknown = { cache_control: { type: 'ephemeral', ttl: '1h' } };
    for (let i = 0; i < 100_000; i++) deep = { content: [deep] };
    expect(longestCacheLifetime(deep)).toBe('1h');
  });
});
