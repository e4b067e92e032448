import { loadTokenizer } from '@holdfast/tokenizer';
import { describe, expect, test } from 'vitest';
import { OutputMeter } from '../../call/output-meter.js';
import { chatAdapter } from './adapter.js';
import { ChatTranscript, type ChatChunk } from './transcript.js';
import { plainUsage } from '../usage.js';

/** One token per whitespace-separated word, for readable expectations. */
const words = {
  name: 'estimate' as const,
  countText: (t: string) => t.split(/\s+/).filter(Boolean).length,
};

const feed = (tr: ChatTranscript, meter: OutputMeter, chunk: ChatChunk) => {
  for (const t of tr.add(chunk)) meter.add(t.choice, t.text);
};

describe('ChatTranscript', () => {
  test('assembles content, tool calls and finish reasons per choice; the meter counts each choice joined', () => {
    const tr = new ChatTranscript({ assemble: true, wantsUsage: false, model: 'fallback' });
    const meter = new OutputMeter({ cut: words, exact: true, bill: words });
    feed(tr, meter, {
      id: 'c1',
      created: 1,
      model: 'm',
      choices: [{ index: 0, delta: { role: 'assistant', content: '' } }],
    });
    feed(tr, meter, {
      choices: [
        { index: 0, delta: { content: 'hello there' } },
        { index: 1, delta: { content: 'hi' } },
      ],
    });
    feed(tr, meter, {
      choices: [
        {
          index: 1,
          delta: {
            tool_calls: [
              {
                index: 0,
                id: 't1',
                type: 'function',
                function: { name: 'get', arguments: '{"a":' },
              },
            ],
          },
        },
      ],
    });
    feed(tr, meter, {
      choices: [
        { index: 1, delta: { tool_calls: [{ index: 0, function: { arguments: ' 1}' } }] } },
      ],
    });
    feed(tr, meter, { choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
    // Each choice's text is counted joined: "hello there" and 'higet{"a": 1}'.
    expect(meter.counted).toBe(2 + 2);
    expect(tr.unfinished()).toEqual([1]);
    const c = tr.assemble(true, plainUsage(10, 4));
    expect(c).toMatchObject({
      id: 'c1',
      object: 'chat.completion',
      model: 'm',
      choices: [
        { index: 0, message: { role: 'assistant', content: 'hello there' }, finish_reason: 'stop' },
        {
          index: 1,
          message: {
            content: 'hi',
            tool_calls: [
              { id: 't1', type: 'function', function: { name: 'get', arguments: '{"a": 1}' } },
            ],
          },
          finish_reason: 'length',
        },
      ],
      usage: { prompt_tokens: 10, completion_tokens: 4, total_tokens: 14 },
    });
  });

  test("the provider's usage counts only when it is well-formed", () => {
    const tr = new ChatTranscript({ assemble: false, wantsUsage: false, model: 'm' });
    tr.add({ choices: [{ index: 0, delta: { content: 'a b c' } }] });
    expect(tr.usage()).toBeUndefined();
    tr.add({
      choices: [],
      usage: {
        prompt_tokens: 8,
        completion_tokens: 4,
        prompt_tokens_details: { cached_tokens: 99 },
      },
    });
    expect(tr.usage()).toEqual({ ...plainUsage(8, 4), cachedPromptTokens: 8 });
    // A later usage whose counts are not counts does not wipe the provider's word out...
    tr.add({ choices: [], usage: { prompt_tokens: -1, completion_tokens: 1.5 } });
    expect(tr.usage()).toEqual({ ...plainUsage(8, 4), cachedPromptTokens: 8 });
    // ...a later well-formed one replaces it (a provider reporting as it goes counts up).
    tr.add({ choices: [], usage: { prompt_tokens: 8, completion_tokens: 6 } });
    expect(tr.usage()).toEqual(plainUsage(8, 6));
    expect(tr.streamError()).toBeUndefined();
    tr.accept({
      event: undefined,
      data: '{"error":{"message":"overloaded","type":"server_error"}}',
    });
    expect(tr.streamError()?.message).toBe('overloaded');
    const bad = new ChatTranscript({ assemble: false, wantsUsage: false, model: 'm' });
    bad.add({ choices: [], usage: { prompt_tokens: -1, completion_tokens: 1.5 } });
    expect(bad.usage()).toBeUndefined();
  });

  test("audio tokens are read from the stream's final usage chunk and from a whole completion", () => {
    const usage = {
      prompt_tokens: 900,
      completion_tokens: 300,
      prompt_tokens_details: { cached_tokens: 0, audio_tokens: 120 },
      completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 250 },
    };
    const audio = { ...plainUsage(900, 300), audioPromptTokens: 120, audioCompletionTokens: 250 };
    const streamed = new ChatTranscript({ assemble: false, wantsUsage: true, model: 'm' });
    streamed.accept({
      event: undefined,
      data: '{"choices":[{"index":0,"delta":{"content":"hi"}}]}',
    });
    expect(streamed.usage()).toBeUndefined();
    streamed.accept({ event: undefined, data: JSON.stringify({ choices: [], usage }) });
    expect(streamed.usage()).toEqual(audio);

    const whole = new ChatTranscript({ assemble: true, wantsUsage: false, model: 'm' });
    const completion = {
      id: 'chatcmpl-1',
      object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
      usage,
    };
    for (const event of chatAdapter.asEvents(completion)) whole.accept(event);
    expect(whole.usage()).toEqual(audio);
  });

  test('audio counts above their totals are clamped to them, never negative or billed as less', () => {
    const tr = new ChatTranscript({ assemble: false, wantsUsage: false, model: 'm' });
    tr.add({
      choices: [],
      usage: {
        prompt_tokens: 50,
        completion_tokens: 20,
        prompt_tokens_details: { cached_tokens: 10, audio_tokens: 5_000 },
        completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 21 },
      },
    });
    expect(tr.usage()).toEqual({
      ...plainUsage(50, 20),
      cachedPromptTokens: 10,
      audioPromptTokens: 50,
      audioCompletionTokens: 20,
    });
    // Not a count (negative, fractional, a string): no audio, the totals as text.
    tr.add({
      choices: [],
      usage: {
        prompt_tokens: 50,
        completion_tokens: 20,
        prompt_tokens_details: { audio_tokens: -3 },
        completion_tokens_details: { audio_tokens: '9' as unknown as number },
      },
    });
    expect(tr.usage()).toEqual(plainUsage(50, 20));
  });

  test("a streamed audio reply is assembled as OpenAI's message.audio, its transcript counted", () => {
    const tr = new ChatTranscript({ assemble: true, wantsUsage: false, model: 'm' });
    const meter = new OutputMeter({ cut: words, exact: true, bill: words });
    feed(tr, meter, {
      id: 'c1',
      choices: [{ index: 0, delta: { role: 'assistant', content: null } }],
    });
    feed(tr, meter, {
      choices: [
        { index: 0, delta: { audio: { id: 'audio_1', transcript: 'Digits intertwine,' } } },
      ],
    });
    feed(tr, meter, {
      choices: [{ index: 0, delta: { audio: { data: 'UklGR', expires_at: 1_729_234_747 } } }],
    });
    feed(tr, meter, {
      choices: [{ index: 0, delta: { audio: { data: 'sZr', transcript: ' in dance' } } }],
    });
    feed(tr, meter, { choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
    expect(meter.counted).toBe(4);
    expect(tr.assemble(false, plainUsage(10, 40))).toMatchObject({
      choices: [
        {
          message: {
            role: 'assistant',
            content: null,
            audio: {
              id: 'audio_1',
              data: 'UklGRsZr',
              expires_at: 1_729_234_747,
              transcript: 'Digits intertwine, in dance',
            },
          },
          finish_reason: 'stop',
        },
      ],
    });
  });

  test('a call asks for audio output with modalities or the audio parameters', () => {
    const body = { model: 'm', messages: [{ role: 'user' as const, content: 'hi' }] };
    expect(chatAdapter.asked(body).audioOutput).toBe(false);
    expect(chatAdapter.asked({ ...body, modalities: ['text'] }).audioOutput).toBe(false);
    expect(chatAdapter.asked({ ...body, modalities: ['text', 'audio'] }).audioOutput).toBe(true);
    const voice = { ...body, audio: { voice: 'alloy', format: 'wav' } };
    expect(chatAdapter.asked(voice).audioOutput).toBe(true);
  });

  test('a call sends audio when a message has an input_audio part', () => {
    const text = { model: 'm', messages: [{ role: 'user' as const, content: 'hi' }] };
    expect(chatAdapter.asked(text).audioInput).toBe(false);
    const clip = { type: 'input_audio' as const, input_audio: { data: 'AAAA', format: 'mp3' } };
    const spoken = {
      model: 'm',
      messages: [{ role: 'user' as const, content: [{ type: 'text' as const, text: 'hi' }, clip] }],
    };
    expect(chatAdapter.asked(spoken).audioInput).toBe(true);
  });

  test('a usage-only chunk is forwarded only to a client that asked for it', () => {
    const usage = {
      event: undefined,
      data: '{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}',
    };
    expect(
      new ChatTranscript({ assemble: false, wantsUsage: false, model: 'm' }).accept(usage)?.forward,
    ).toBeNull();
    expect(
      new ChatTranscript({ assemble: false, wantsUsage: true, model: 'm' }).accept(usage)?.forward,
    ).toContain('usage');
    expect(
      new ChatTranscript({ assemble: false, wantsUsage: true, model: 'm' }).accept({
        event: undefined,
        data: 'nope',
      }),
    ).toBeUndefined();
  });
});

describe('OutputMeter', () => {
  test('output is counted in a few batches, only once it could pass the limit', () => {
    let calls = 0;
    const counting = {
      name: 'estimate' as const,
      countText: (t: string) => (calls++, words.countText(t)),
    };
    const meter = new OutputMeter({ cut: counting, exact: true, bill: counting });
    for (let i = 0; i < 1_000; i++) {
      meter.add(0, ' word');
      if (meter.overLimit(600)) break;
    }
    expect(meter.counted).toBe(601);
    expect(calls).toBeLessThan(40); // instead of 601, once per chunk
  });

  test('without the model tokenizer: cut by o200k, billed by the proven bound, never less than the cut count', async () => {
    const o200k = await loadTokenizer('o200k_base');
    const bound = await loadTokenizer('estimate');
    const meter = new OutputMeter({ cut: o200k, exact: false, bill: bound });
    meter.add(0, '漢字とかな交じり文 🎉🎉 hello');
    expect(meter.counted).toBe(o200k.countText('漢字とかな交じり文 🎉🎉 hello'));
    expect(await meter.billable()).toBeGreaterThanOrEqual(meter.counted);
  });

  test("with the upstream's count: a cut waits for it, and a count within the limit lets the call go on", async () => {
    const o200k = await loadTokenizer('o200k_base');
    let asked = 0;
    const meter = new OutputMeter({
      cut: o200k,
      exact: false,
      bill: o200k,
      remote: (text) => {
        asked++;
        return Promise.resolve(Math.floor(o200k.countText(text) / 2));
      },
    });
    for (let i = 0; i < 20; i++) meter.add(0, ' word');
    expect(meter.overLimit(15)).toBe(true);
    expect(meter.verifiable).toBe(true);
    expect(await meter.confirmOver(15)).toBe(false);
    expect(meter.counted).toBe(10);
    for (let i = 0; i < 20; i++) meter.add(0, ' word');
    expect(await meter.confirmOver(15)).toBe(true);
    expect(asked).toBe(2);
  });
});
