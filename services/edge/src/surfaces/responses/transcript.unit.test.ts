import { createHash } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { EdgeError } from '../../errors.js';
import type { SseEvent } from '../../upstream/sse.js';
import { plainUsage } from '../usage.js';
import { responsesAdapter } from './adapter.js';
import { ResponsesTranscript } from './transcript.js';

let seq = 0;
const ev = (type: string, data: object = {}): SseEvent => ({
  event: type,
  data: JSON.stringify({ type, sequence_number: seq++, ...data }),
});
const response = {
  id: 'resp_1',
  object: 'response',
  model: 'gpt-4o-mini',
  status: 'in_progress',
  output: [],
};
const message = {
  id: 'msg_1',
  type: 'message',
  status: 'in_progress',
  role: 'assistant',
  content: [],
};

/** A stream of a reasoning summary, a message and a function call, as OpenAI sends one. */
function stream(): SseEvent[] {
  seq = 0;
  return [
    ev('response.created', { response }),
    ev('response.output_item.added', {
      output_index: 0,
      item: { id: 'rs_1', type: 'reasoning', summary: [] },
    }),
    ev('response.reasoning_summary_text.delta', {
      output_index: 0,
      summary_index: 0,
      delta: 'Think.',
    }),
    ev('response.output_item.added', { output_index: 1, item: message }),
    ev('response.content_part.added', {
      output_index: 1,
      content_index: 0,
      part: { type: 'output_text', text: '' },
    }),
    ev('response.output_text.delta', { output_index: 1, content_index: 0, delta: 'Hello' }),
    ev('response.output_text.delta', { output_index: 1, content_index: 0, delta: ' world' }),
    ev('response.output_item.added', {
      output_index: 2,
      item: { id: 'fc_1', type: 'function_call', name: 'lookup', arguments: '', call_id: 'c1' },
    }),
    ev('response.function_call_arguments.delta', { output_index: 2, delta: '{"q":1}' }),
    ev('response.audio.delta', { output_index: 3, delta: 'AAAA' }),
  ];
}

const completed = (extra: object = {}) =>
  ev('response.completed', {
    response: {
      ...response,
      status: 'completed',
      usage: {
        input_tokens: 30,
        input_tokens_details: { cached_tokens: 10 },
        output_tokens: 20,
        output_tokens_details: { reasoning_tokens: 8 },
      },
      ...extra,
    },
  });

describe('ResponsesTranscript', () => {
  test("the stored response id: the terminal response's, else response.created's; none with store: false or an id not a response id", () => {
    const read = (store: boolean | undefined, events: SseEvent[]) => {
      const t = new ResponsesTranscript({ model: 'gpt-4o-mini', store });
      for (const e of events) t.accept(e);
      return t.storedResponseId();
    };
    const done = (id: string) => ev('response.completed', { response: { ...response, id } });
    expect(read(undefined, [ev('response.created', { response })])).toBe('resp_1');
    expect(read(true, [ev('response.created', { response }), done('resp_2')])).toBe('resp_2');
    expect(read(false, [ev('response.created', { response }), done('resp_2')])).toBeUndefined();
    expect(read(undefined, [done('msg_2')])).toBeUndefined();
    expect(read(undefined, [done('resp_a:b')])).toBeUndefined();
    expect(read(undefined, [])).toBeUndefined();
  });

  test('the stored output item ids: from output_item events and the terminal output, each once, item ids only, at most 256; none with store: false', () => {
    const read = (store: boolean | undefined, events: SseEvent[]) => {
      const t = new ResponsesTranscript({ model: 'gpt-4o-mini', store });
      for (const e of events) t.accept(e);
      return t.storedItemIds();
    };
    const final = { output: [message, { id: 'ws_2', type: 'web_search_call' }, { id: 'a:b' }] };
    expect(read(undefined, [...stream(), completed(final)])).toEqual([
      'rs_1',
      'msg_1',
      'fc_1',
      'ws_2',
    ]);
    expect(read(false, [...stream(), completed(final)])).toEqual([]);
    const many = Array.from({ length: 300 }, (_, i) => ({ id: `msg_${i}`, type: 'message' }));
    const ids = read(true, [completed({ output: many })]);
    expect(ids).toHaveLength(256);
    expect(ids.at(-1)).toBe('msg_255');
  });

  test("sealed reasoning is the team's by its digest, store: false too: from the reasoning item's output_item.done (a stream cut before its end) and the terminal output, once each", () => {
    const sealed = { id: 'rs_1', type: 'reasoning', summary: [], encrypted_content: 'gAAAAAseal' };
    const digest = `ec_${createHash('sha256').update('gAAAAAseal').digest('hex')}`;
    const done = ev('response.output_item.done', { output_index: 0, item: sealed });
    for (const store of [false, true]) {
      const cut = new ResponsesTranscript({ model: 'gpt-5', store });
      for (const e of [...stream().slice(0, 3), done]) cut.accept(e);
      expect(cut.storedItemIds().filter((id) => id.startsWith('ec_'))).toEqual([digest]);
      const whole = new ResponsesTranscript({ model: 'gpt-5', store });
      for (const e of [...stream(), done, completed({ output: [sealed, sealed] })]) whole.accept(e);
      expect(whole.storedItemIds().filter((id) => id.startsWith('ec_'))).toEqual([digest]);
    }
    const json = new ResponsesTranscript({ model: 'gpt-5', store: false });
    for (const e of responsesAdapter.asEvents({ output: [sealed] })) json.accept(e);
    expect(json.storedItemIds()).toEqual([digest]);
  });

  test('counts every text the model writes (reasoning, output, function names and arguments), not audio bytes', () => {
    const t = new ResponsesTranscript({ model: 'gpt-4o-mini' });
    const texts = stream().flatMap((e) => t.accept(e)?.texts ?? []);
    expect(texts.map((x) => x.text)).toEqual(['Think.', 'Hello', ' world', 'lookup', '{"q":1}']);
    expect(t.finished()).toBe(false);
    expect(t.usage()).toBeUndefined();
  });

  test('items out of their form (content or summary not a list, parts not objects, an index of 1e9) are read, not thrown on: the usage still counts', () => {
    seq = 0;
    const t = new ResponsesTranscript({ model: 'gpt-4o-mini' });
    const odd = [
      ev('response.created', { response }),
      ev('response.output_item.added', { output_index: 0, item: { ...message, content: 'x' } }),
      ev('response.output_text.delta', { output_index: 0, content_index: 1e9, delta: 'Hi' }),
      ev('response.output_item.added', {
        output_index: 1,
        item: { id: 'rs_1', type: 'reasoning', summary: { text: 'no' } },
      }),
      ev('response.reasoning_summary_text.delta', {
        output_index: 1,
        summary_index: 3,
        delta: 'A',
      }),
      ev('response.output_item.done', {
        output_index: 2,
        item: { ...message, status: 'completed', content: [null, 5, { text: 'ok' }] },
      }),
    ];
    const texts = odd.flatMap((e) => t.accept(e)?.texts ?? []);
    expect(texts.map((x) => x.text).join('')).toContain('Hi');
    expect(t.accept(completed())?.forward).toBeDefined();
    expect(t.usage()).toEqual({
      ...plainUsage(30, 20),
      cachedPromptTokens: 10,
      reasoningTokens: 8,
    });
    expect(t.assemble(false, plainUsage(1, 1))).toMatchObject({ status: 'completed' });
    expect(JSON.parse(t.endAtLength(plainUsage(30, 5)).split('data: ')[1]!)).toMatchObject({
      response: { status: 'incomplete' },
    });
  });

  test('passes each event on with its name, and reads the usage of the terminal event', () => {
    const t = new ResponsesTranscript({ model: 'gpt-4o-mini' });
    for (const e of stream()) t.accept(e);
    const done = completed();
    expect(t.accept(done)?.forward).toBe(`event: response.completed\ndata: ${done.data}\n\n`);
    expect(t.finished()).toBe(true);
    expect(t.usage()).toEqual({
      ...plainUsage(30, 20),
      cachedPromptTokens: 10,
      reasoningTokens: 8,
    });
    expect(t.assemble(false, plainUsage(1, 1))).toMatchObject({
      id: 'resp_1',
      status: 'completed',
    });
  });

  test('a cut stream ends with response.incomplete (max_output_tokens), its items as far as they got', () => {
    const t = new ResponsesTranscript({ model: 'gpt-4o-mini' });
    for (const e of stream()) t.accept(e);
    const end = t.endAtLength(plainUsage(30, 5));
    expect(end.startsWith('event: response.incomplete\ndata: ')).toBe(true);
    const data = JSON.parse(end.split('data: ')[1]!) as {
      sequence_number: number;
      response: Record<string, unknown>;
    };
    expect(data.sequence_number).toBe(10);
    expect(data.response).toMatchObject({
      id: 'resp_1',
      status: 'incomplete',
      incomplete_details: { reason: 'max_output_tokens' },
      usage: { input_tokens: 30, output_tokens: 5 },
      output: [
        { type: 'reasoning', summary: [{ text: 'Think.' }], status: 'incomplete' },
        {
          type: 'message',
          content: [{ type: 'output_text', text: 'Hello world' }],
          status: 'incomplete',
        },
        { type: 'function_call', name: 'lookup', arguments: '{"q":1}', status: 'incomplete' },
      ],
    });
    expect(t.assemble(true, plainUsage(30, 5))).toMatchObject({ status: 'incomplete' });
  });

  test('a plain JSON answer is counted from its items; errors are error events with our code', () => {
    const t = new ResponsesTranscript({ model: 'gpt-4o-mini' });
    const json = {
      ...response,
      status: 'completed',
      output: [
        { ...message, status: 'completed', content: [{ type: 'output_text', text: 'All done.' }] },
      ],
      usage: { input_tokens: 3, output_tokens: 3 },
    };
    const texts = responsesAdapter.asEvents(json).flatMap((e) => t.accept(e)?.texts ?? []);
    expect(texts.map((x) => x.text)).toEqual(['All done.']);
    expect(t.usage()).toEqual(plainUsage(3, 3));
    const err = t.errorEvent(new EdgeError({ code: 'budget_exceeded', message: 'No room.' }), 'r1');
    expect(err.startsWith('event: error\n')).toBe(true);
    expect(JSON.parse(err.split('data: ')[1]!)).toMatchObject({
      type: 'error',
      code: 'budget_exceeded',
      message: 'No room.',
    });
    expect(t.doneEvent()).toBe('');
  });
});

describe('ResponsesTranscript tool uses', () => {
  const item = (output_index: number, type: string) =>
    ev('response.output_item.done', {
      output_index,
      item: { id: `${type}_${output_index}`, type, status: 'completed' },
    });

  test("a *_call item is a use: the final response's output, else the items streamed", () => {
    const t = new ResponsesTranscript({ model: 'gpt-5' });
    for (const e of [
      ev('response.created', { response }),
      item(0, 'web_search_call'),
      item(1, 'web_search_call'),
      item(2, 'file_search_call'),
      item(3, 'code_interpreter_call'),
      item(4, 'mcp_call'),
    ])
      t.accept(e);
    expect(t.toolUses()).toEqual({ web_search: 2, file_search: 1, code_interpreter: 1 });
    t.accept(
      ev('response.completed', {
        response: {
          ...response,
          status: 'completed',
          output: [{ type: 'web_search_call' }, { type: 'message' }, { type: 'constructor' }],
          usage: { input_tokens: 10, output_tokens: 5 },
        },
      }),
    );
    expect(t.toolUses()).toEqual({ web_search: 1 });
  });

  test('no tool call is none', () => {
    const t = new ResponsesTranscript({ model: 'gpt-5' });
    t.accept(ev('response.created', { response }));
    expect(t.toolUses()).toBeUndefined();
  });
});
