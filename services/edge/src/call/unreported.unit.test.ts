import { describe, expect, test } from 'vitest';
import {
  longestCacheLifetime,
  unreportedToolUses,
  unreportedUsage,
  type UnreportedCall,
} from './unreported.js';

const none = () => undefined;
const call = (over: Partial<UnreportedCall> = {}): UnreportedCall => ({
  asked: { model: 'm', maxOutput: 100, choices: 1, stream: true, endUser: null },
  promptTokens: 500,
  maxOutput: 100,
  model: {},
  heldTools: {},
  ...over,
});

describe('unreportedToolUses', () => {
  test('a bound on each tool (max_uses): each kind its bound, or the uses seen where more', () => {
    const held = { web_search: 3, code_interpreter: 2 };
    expect(unreportedToolUses(held, undefined, false)).toEqual(held);
    expect(unreportedToolUses(held, { web_search: 1 }, false)).toEqual(held);
    // An upstream past its bound: what it showed (an overrun).
    expect(unreportedToolUses(held, { web_search: 5, web_fetch: 1 }, false)).toEqual({
      web_search: 5,
      web_fetch: 1,
      code_interpreter: 2,
    });
  });

  test('one bound on all tools (max_tool_calls, held at the dearest): the uses seen, the rest at the dearest', () => {
    const held = { web_search: 3 };
    expect(unreportedToolUses(held, undefined, true)).toEqual({ web_search: 3 });
    // A file search seen is billed as one; two calls of the bound are left, at the dearest.
    expect(unreportedToolUses(held, { file_search: 1 }, true)).toEqual({
      file_search: 1,
      web_search: 2,
    });
    expect(unreportedToolUses(held, { file_search: 2, web_search: 1 }, true)).toEqual({
      file_search: 2,
      web_search: 1,
    });
    expect(unreportedToolUses(held, { file_search: 4 }, true)).toEqual({ file_search: 4 });
  });

  test('nothing held, nothing seen: no tool uses', () => {
    expect(unreportedToolUses({}, undefined, false)).toBeUndefined();
    expect(unreportedToolUses({}, undefined, true)).toBeUndefined();
    expect(unreportedToolUses({}, { web_fetch: 1 }, false)).toEqual({ web_fetch: 1 });
  });
});

describe('unreportedUsage', () => {
  test('tool uses held: billed the bound (a search the stream did not show is billed all the same)', () => {
    const held = call({ heldTools: { web_search: 3 } });
    expect(unreportedUsage(held, 7, undefined, none).toolUses).toEqual({ web_search: 3 });
    expect(unreportedUsage(held, 7, undefined, none, { web_search: 1 }).toolUses).toEqual({
      web_search: 3,
    });
    const asked = {
      ...call().asked,
      tools: { per: 'call' as const, tools: [], maxToolCalls: 3 },
    };
    const pooled = call({ asked, heldTools: { web_search: 3 } });
    expect(unreportedUsage(pooled, 0, undefined, none, { file_search: 1 }).toolUses).toEqual({
      file_search: 1,
      web_search: 2,
    });
    expect(unreportedUsage(call(), 0, undefined, none).toolUses).toBeUndefined();
  });

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
