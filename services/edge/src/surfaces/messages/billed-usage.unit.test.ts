import type { CompiledModel } from '@holdfast/config';
import { TokenCounter } from '@holdfast/tokenizer';
import { afterAll, describe, expect, test } from 'vitest';
import type { CountContext } from '../../call/adapter.js';
import type { CallDeps } from '../../call/deps.js';
import type { SseEvent } from '../../upstream/sse.js';
import { countMessagesPrompt } from './adapter.js';
import { MessagesRequest } from './schema.js';
import { MessagesTranscript } from './transcript.js';

/**
 * What Anthropic bills that the top-level usage of a Messages stream does not say, and a
 * request that makes it bill past the hold.
 */

const ev = (type: string, data: object = {}): SseEvent => ({
  event: type,
  data: JSON.stringify({ type, ...data }),
});

/** A stream that starts with these input counts and ends with this message_delta usage. */
function settled(start: object, delta: object) {
  const t = new MessagesTranscript({ model: 'claude' });
  t.accept(ev('message_start', { message: { id: 'msg_1', content: [], usage: start } }));
  t.accept(ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }));
  t.accept(ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Hi' } }));
  t.accept(ev('content_block_stop', { index: 0 }));
  t.accept(ev('message_delta', { delta: { stop_reason: 'end_turn' }, usage: delta }));
  t.accept(ev('message_stop'));
  return t.usage();
}

describe('the Messages usage the provider bills', () => {
  test('a compaction iteration (usage.iterations) is billed: the top-level usage leaves it out', () => {
    // Anthropic's compaction docs ("Understanding usage"): the top-level input_tokens and
    // output_tokens exclude the compaction iteration; the bill is the sum of usage.iterations.
    const usage = {
      input_tokens: 23_000,
      output_tokens: 1_000,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      iterations: [
        {
          type: 'compaction',
          input_tokens: 180_000,
          output_tokens: 3_500,
          cache_creation_input_tokens: 0,
          cache_read_input_tokens: 0,
        },
        {
          type: 'message',
          input_tokens: 23_000,
          output_tokens: 1_000,
          cache_creation_input_tokens: 0,
          cache_read_input_tokens: 0,
        },
      ],
    };
    const billed = settled({ input_tokens: 23_000, output_tokens: 1 }, usage);
    expect(billed?.promptTokens).toBe(203_000);
    expect(billed?.completionTokens).toBe(4_500);
  });

  test('cache writes message_delta adds (a server tool loop) are billed as cache writes, not as input', () => {
    // message_delta's usage is cumulative and carries no cache_creation breakdown: the 5,000
    // writes a search iteration added are cache writes (at least the 5-minute price).
    const start = {
      input_tokens: 50,
      output_tokens: 1,
      cache_creation_input_tokens: 1_000,
      cache_read_input_tokens: 0,
      cache_creation: { ephemeral_5m_input_tokens: 1_000, ephemeral_1h_input_tokens: 0 },
    };
    const delta = {
      input_tokens: 900,
      output_tokens: 300,
      cache_creation_input_tokens: 6_000,
      cache_read_input_tokens: 2_000,
      server_tool_use: { web_search_requests: 1 },
    };
    const billed = settled(start, delta);
    expect(billed?.promptTokens).toBe(8_900);
    expect((billed?.cacheWrite5mTokens ?? 0) + (billed?.cacheWrite1hTokens ?? 0)).toBe(6_000);
  });

  test("message_delta's null counts (the API types them nullable) keep message_start's", () => {
    const start = {
      input_tokens: 50,
      output_tokens: 1,
      cache_creation_input_tokens: 1_000,
      cache_read_input_tokens: 2_000,
      cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 1_000 },
    };
    const delta = {
      input_tokens: null,
      output_tokens: 300,
      cache_creation_input_tokens: null,
      cache_read_input_tokens: null,
      server_tool_use: null,
    };
    const billed = settled(start, delta);
    expect(billed?.promptTokens).toBe(3_050);
    expect(billed?.cachedPromptTokens).toBe(2_000);
    expect(billed?.cacheWrite1hTokens).toBe(1_000);
    expect(billed?.completionTokens).toBe(300);
  });
});

describe('a Messages request that triggers a compaction', () => {
  const counter = new TokenCounter({ poolSize: 1 });
  afterAll(() => counter.close());

  test('context_management with a compact edit is refused before anything is held', async () => {
    const body = MessagesRequest.parse({
      model: 'claude',
      max_tokens: 1_000,
      messages: [{ role: 'user', content: 'Summarise our work so far.' }],
      context_management: {
        edits: [
          { type: 'clear_tool_uses_20250919' },
          { type: 'compact_20260112', trigger: { type: 'input_tokens', value: 50_000 } },
        ],
      },
    });
    const ctx: CountContext = {
      deps: { counter } as unknown as CallDeps,
      model: { id: 'claude' } as CompiledModel,
      tokenizer: 'estimate',
      target: undefined,
      upstream: undefined,
      headers: { 'anthropic-beta': 'compact-2026-01-12' },
      serviceTier: 'default',
      owner: { tenant: 'team', signal: new AbortController().signal },
      countFor: { tenant: 'team' },
    };
    const counted = await countMessagesPrompt(body, ctx);
    expect(counted.ok).toBe(false);
    if (!counted.ok) {
      expect(counted.error.code).toBe('invalid_request');
      expect(counted.error.param).toBe('context_management.edits.1');
    }
    // The other edits only clear input: they go on.
    const clearOnly = MessagesRequest.parse({
      ...body,
      context_management: { edits: [{ type: 'clear_tool_uses_20250919' }] },
    });
    expect((await countMessagesPrompt(clearOnly, ctx)).ok).toBe(true);
  });
});

describe('a Messages request that offers the advisor tool', () => {
  const counter = new TokenCounter({ poolSize: 1 });
  afterAll(() => counter.close());

  test('advisor_* (a sub-inference on another model, billed at its rates) is refused, allowance or not', async () => {
    // The advisor reads the whole transcript and writes 1,400-1,800 tokens a call on the
    // advisor model (Opus), reported apart from the executor's usage (usage.iterations,
    // advisor_message, with its model): no price of this model states those rates.
    const body = MessagesRequest.parse({
      model: 'claude',
      max_tokens: 1_000,
      messages: [{ role: 'user', content: 'Plan the migration.' }],
      tools: [{ type: 'advisor_20260301', name: 'advisor', model: 'claude-opus-4-8', max_uses: 3 }],
    });
    const ctx: CountContext = {
      deps: { counter } as unknown as CallDeps,
      model: { id: 'claude', upstreamStateAllowanceTokens: 6_000 } as CompiledModel,
      tokenizer: 'estimate',
      target: undefined,
      upstream: undefined,
      headers: { 'anthropic-beta': 'advisor-tool-2026-03-01' },
      serviceTier: 'default',
      owner: { tenant: 'team', signal: new AbortController().signal },
      countFor: { tenant: 'team' },
    };
    const counted = await countMessagesPrompt(body, ctx);
    expect(counted.ok).toBe(false);
    if (!counted.ok) expect(counted.error.param).toBe('tools.0');
  });
});
