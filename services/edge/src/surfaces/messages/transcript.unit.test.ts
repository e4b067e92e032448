import { describe, expect, test } from 'vitest';
import { EdgeError } from '../../errors.js';
import type { SseEvent } from '../../upstream/sse.js';
import { plainUsage } from '../usage.js';
import { messagesAdapter } from './adapter.js';
import { MessagesTranscript } from './transcript.js';
import { anthropicInput } from './usage.js';

const ev = (type: string, data: object = {}): SseEvent => ({
  event: type,
  data: JSON.stringify({ type, ...data }),
});
const startUsage = {
  input_tokens: 10,
  cache_creation_input_tokens: 30,
  cache_read_input_tokens: 100,
  cache_creation: { ephemeral_5m_input_tokens: 20, ephemeral_1h_input_tokens: 10 },
  output_tokens: 1,
};

/** Thinking, text and a tool call, as Anthropic streams them (no message_delta yet). */
function stream(): SseEvent[] {
  return [
    ev('message_start', {
      message: {
        id: 'msg_1',
        type: 'message',
        role: 'assistant',
        model: 'claude',
        content: [],
        usage: startUsage,
      },
    }),
    ev('content_block_start', {
      index: 0,
      content_block: { type: 'thinking', thinking: '', signature: '' },
    }),
    ev('content_block_delta', { index: 0, delta: { type: 'thinking_delta', thinking: 'Hmm.' } }),
    ev('content_block_delta', { index: 0, delta: { type: 'signature_delta', signature: 'sig' } }),
    ev('content_block_stop', { index: 0 }),
    ev('ping'),
    ev('content_block_start', { index: 1, content_block: { type: 'text', text: '' } }),
    ev('content_block_delta', { index: 1, delta: { type: 'text_delta', text: 'Hi there' } }),
    ev('content_block_stop', { index: 1 }),
    ev('content_block_start', {
      index: 2,
      content_block: { type: 'tool_use', id: 't1', name: 'lookup', input: {} },
    }),
    ev('content_block_delta', {
      index: 2,
      delta: { type: 'input_json_delta', partial_json: '{"q":' },
    }),
    ev('content_block_delta', {
      index: 2,
      delta: { type: 'input_json_delta', partial_json: '1}' },
    }),
  ];
}

describe('MessagesTranscript', () => {
  test('counts thinking, text, tool names and input JSON; the input counts come with message_start', () => {
    const t = new MessagesTranscript({ model: 'claude' });
    const texts = stream().flatMap((e) => t.accept(e)?.texts ?? []);
    expect(texts.map((x) => x.text)).toEqual(['Hmm.', 'Hi there', 'lookup', '{"q":', '1}']);
    expect(t.usage()).toBeUndefined();
    expect(t.inputUsage()).toEqual({
      promptTokens: 140,
      cachedPromptTokens: 100,
      cacheWrite5mTokens: 20,
      cacheWrite1hTokens: 10,
    });
  });

  test('message_delta completes the usage (cumulative) and, with its stop_reason, finishes it; the message assembles', () => {
    const t = new MessagesTranscript({ model: 'claude' });
    for (const e of stream()) t.accept(e);
    t.accept(ev('content_block_stop', { index: 2 }));
    t.accept(
      ev('message_delta', {
        delta: { stop_reason: 'tool_use', stop_sequence: null },
        usage: { output_tokens: 25, output_tokens_details: { thinking_tokens: 2 } },
      }),
    );
    // Finished with its stop_reason (nothing but message_stop follows), closed with message_stop
    // only when the stream did not bring it.
    expect(t.finished()).toBe(true);
    expect(t.doneEvent()).toContain('event: message_stop');
    t.accept(ev('message_stop'));
    expect(t.finished()).toBe(true);
    expect(t.doneEvent()).toBe('');
    expect(t.usage()).toEqual({
      promptTokens: 140,
      completionTokens: 25,
      cachedPromptTokens: 100,
      cacheWrite5mTokens: 20,
      cacheWrite1hTokens: 10,
      reasoningTokens: 2,
      // Messages reports no audio.
      audioPromptTokens: 0,
      audioCompletionTokens: 0,
    });
    expect(t.assemble(false, plainUsage(0, 0))).toMatchObject({
      id: 'msg_1',
      stop_reason: 'tool_use',
      content: [
        { type: 'thinking', thinking: 'Hmm.', signature: 'sig' },
        { type: 'text', text: 'Hi there' },
        { type: 'tool_use', name: 'lookup', input: { q: 1 } },
      ],
      usage: { input_tokens: 10, output_tokens: 25 },
    });
  });

  test('usage only in message_delta, input grown by server tools, events out of order: the cumulative counts win', () => {
    const only = new MessagesTranscript({ model: 'claude' });
    only.accept(ev('message_start', { message: { id: 'm', content: [] } }));
    expect(only.inputUsage()).toBeUndefined();
    only.accept(ev('message_delta', { delta: {}, usage: { output_tokens: 7 } }));
    // No input counts anywhere: no provider usage (the edge bills its own count of both).
    expect(only.usage()).toBeUndefined();
    only.accept(ev('message_delta', { delta: {}, usage: { input_tokens: 12, output_tokens: 9 } }));
    expect(only.usage()).toMatchObject({ promptTokens: 12, completionTokens: 9 });
    // A server tool read 5,000 more input: message_delta says so, cumulatively.
    const grown = new MessagesTranscript({ model: 'claude' });
    grown.accept(
      ev('message_start', { message: { usage: { input_tokens: 10, output_tokens: 1 } } }),
    );
    grown.accept(
      ev('message_delta', { delta: {}, usage: { input_tokens: 5_010, output_tokens: 30 } }),
    );
    expect(grown.usage()).toMatchObject({ promptTokens: 5_010, completionTokens: 30 });
    // message_delta before message_start: the start's early output_tokens do not undo it.
    const late = new MessagesTranscript({ model: 'claude' });
    late.accept(ev('message_delta', { delta: {}, usage: { output_tokens: 40 } }));
    late.accept(
      ev('message_start', { message: { usage: { input_tokens: 10, output_tokens: 1 } } }),
    );
    expect(late.usage()).toMatchObject({ promptTokens: 10, completionTokens: 40 });
  });

  test('a cut stream is closed as Anthropic closes one at max_tokens', () => {
    const t = new MessagesTranscript({ model: 'claude' });
    for (const e of stream()) t.accept(e);
    const end = t.endAtLength(plainUsage(140, 12));
    const events = end
      .split('\n\n')
      .filter(Boolean)
      .map((e) => e.split('\n')[0]);
    expect(events).toEqual([
      'event: content_block_stop',
      'event: message_delta',
      'event: message_stop',
    ]);
    expect(end).toContain('"index":2');
    expect(end).toContain('"stop_reason":"max_tokens"');
    // Closed: nothing more follows (a cut at the output limit writes doneEvent after it).
    expect(t.doneEvent()).toBe('');
    expect(t.assemble(true, { ...plainUsage(140, 12), cachedPromptTokens: 100 })).toMatchObject({
      stop_reason: 'max_tokens',
      usage: { input_tokens: 40, cache_read_input_tokens: 100, output_tokens: 12 },
    });
    const err = t.errorEvent(new EdgeError({ code: 'upstream_error', message: 'Lost.' }), 'r');
    expect(JSON.parse(err.split('data: ')[1]!)).toEqual({
      type: 'error',
      error: { type: 'api_error', message: 'upstream_error: Lost.' },
    });
  });

  test('a plain JSON message becomes the stream it would have been', () => {
    const t = new MessagesTranscript({ model: 'claude' });
    const json = {
      id: 'msg_2',
      type: 'message',
      role: 'assistant',
      model: 'claude',
      content: [
        { type: 'text', text: 'Done.' },
        { type: 'tool_use', id: 't', name: 'f', input: { a: 1 } },
      ],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: 5, output_tokens: 4 },
    };
    const texts = messagesAdapter.asEvents(json).flatMap((e) => t.accept(e)?.texts ?? []);
    expect(texts.map((x) => x.text)).toEqual(['Done.', 'f', '{"a":1}']);
    expect(t.finished()).toBe(true);
    expect(t.usage()).toEqual(plainUsage(5, 4));
    expect(t.assemble(false, plainUsage(5, 4))).toMatchObject({
      content: json.content,
      stop_reason: 'end_turn',
    });
  });

  test('cache writes without the 5-minute / 1-hour breakdown count as 5-minute writes', () => {
    expect(anthropicInput({ input_tokens: 3, cache_creation_input_tokens: 7 })).toEqual({
      promptTokens: 10,
      cachedPromptTokens: 0,
      cacheWrite5mTokens: 7,
      cacheWrite1hTokens: 0,
    });
  });
});

describe('MessagesTranscript tool uses', () => {
  const search = (index: number, name = 'web_search') =>
    ev('content_block_start', {
      index,
      content_block: { type: 'server_tool_use', id: `srvtoolu_${index}`, name, input: {} },
    });

  test('usage.server_tool_use wins; without it a server_tool_use block is a use', () => {
    const t = new MessagesTranscript({ model: 'claude' });
    for (const e of [
      ev('message_start', { message: { usage: startUsage } }),
      search(0),
      search(1),
      search(2, 'web_fetch'),
    ])
      t.accept(e);
    expect(t.toolUses()).toEqual({ web_search: 2, web_fetch: 1 });
    t.accept(
      ev('message_delta', {
        delta: { stop_reason: 'end_turn' },
        usage: {
          output_tokens: 5,
          server_tool_use: { web_search_requests: 3, web_fetch_requests: 0 },
        },
      }),
    );
    expect(t.toolUses()).toEqual({ web_search: 3, web_fetch: 0 });
  });

  test('before the final usage: the blocks seen, or the counts of message_start where more', () => {
    const t = new MessagesTranscript({ model: 'claude' });
    const start = { ...startUsage, server_tool_use: { web_search_requests: 0 } };
    t.accept(ev('message_start', { message: { usage: start } }));
    expect(t.toolUses()).toEqual({ web_search: 0 });
    t.accept(search(0));
    expect(t.toolUses()).toEqual({ web_search: 1 });
    const early = new MessagesTranscript({ model: 'claude' });
    const counted = { ...startUsage, server_tool_use: { web_search_requests: 2 } };
    early.accept(ev('message_start', { message: { usage: counted } }));
    early.accept(search(0));
    expect(early.toolUses()).toEqual({ web_search: 2 });
  });

  test('a hostile count (negative, a string, huge) is not a use; no server tool is none', () => {
    const t = new MessagesTranscript({ model: 'claude' });
    t.accept(ev('message_start', { message: { usage: startUsage } }));
    expect(t.toolUses()).toBeUndefined();
    t.accept(
      ev('message_delta', {
        usage: {
          output_tokens: 5,
          server_tool_use: { web_search_requests: -4, web_fetch_requests: '9' },
        },
      }),
    );
    expect(t.toolUses()).toEqual({});
  });

  test("the files a code execution result reports are stored with the container, a malformed id or another block's never", () => {
    const result = (type: string, outputs: unknown[]) =>
      ev('content_block_start', {
        index: 1,
        content_block: { type, content: { type: 'x_result', content: outputs } },
      });
    const t = new MessagesTranscript({ model: 'claude' });
    t.accept(ev('message_start', { message: { id: 'msg_1', container: { id: 'container_a' } } }));
    t.accept(
      result('bash_code_execution_tool_result', [{ file_id: 'file_1' }, { file_id: 'file_2' }]),
    );
    t.accept(result('code_execution_tool_result', [{ file_id: 'file_3' }, null, { file_id: 7 }]));
    t.accept(result('web_search_tool_result', [{ file_id: 'file_4' }]));
    t.accept(result('code_execution_tool_result', [{ file_id: 'file_a b' }, { file_id: 'msg_5' }]));
    expect(t.storedItemIds()).toEqual(['container_a', 'file_1', 'file_2', 'file_3']);
  });

  test('the container the call ran in is stored (message_start or message_delta), a malformed id never', () => {
    const container = (id: unknown) => ({ id, expires_at: '2026-12-06T12:00:00Z' });
    const t = new MessagesTranscript({ model: 'claude' });
    expect(t.storedItemIds()).toEqual([]);
    t.accept(
      ev('message_start', { message: { id: 'msg_1', container: container('container_a') } }),
    );
    expect(t.storedItemIds()).toEqual(['container_a']);
    const delta = (id: unknown) =>
      ev('message_delta', { delta: { stop_reason: 'end_turn', container: container(id) } });
    t.accept(delta('container_b'));
    expect(t.storedItemIds()).toEqual(['container_b']);
    const u = new MessagesTranscript({ model: 'claude' });
    for (const id of ['container_a b', 'x:{y}', 7, null]) u.accept(delta(id));
    expect(u.storedItemIds()).toEqual([]);
  });

  test("a message_delta without an output count leaves the usage unreported (message_start's 1 is a placeholder)", () => {
    for (const usage of [{ output_tokens: null }, undefined, {}]) {
      const t = new MessagesTranscript({ model: 'claude' });
      t.accept(ev('message_start', { message: { usage: { input_tokens: 30, output_tokens: 1 } } }));
      const delta = { stop_reason: 'end_turn' };
      t.accept(ev('message_delta', usage ? { delta, usage } : { delta }));
      expect(t.usage()).toBeUndefined();
      expect(t.inputUsage()).toMatchObject({ promptTokens: 30 });
      expect(t.assemble(false, plainUsage(30, 40))).toMatchObject({
        usage: { input_tokens: 30, output_tokens: 40 },
      });
    }
  });

  test('an error event is the status its type stands for, before message_start or after it', () => {
    const error = (type: string) => ev('error', { error: { type, message: 'm' } });
    const first = new MessagesTranscript({ model: 'claude' });
    first.accept(error('overloaded_error'));
    first.accept(error('api_error'));
    expect(first.streamError()).toEqual({
      status: 529,
      message: 'overloaded_error: m',
      beforeStart: true,
    });
    const later = new MessagesTranscript({ model: 'claude' });
    for (const e of stream()) later.accept(e);
    later.accept(error('something_new'));
    expect(later.streamError()).toMatchObject({ status: 500, beforeStart: false });
  });
});
