import { countChatPrompt, loadTokenizer, REFERENCE_CASES } from '@holdfast/tokenizer';
import type OpenAI from 'openai';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { describe, expect, it } from 'vitest';
import { useMockUpstream } from '../test/harness.js';

const mock = useMockUpstream();

const messages = [
  { role: 'system' as const, content: 'You summarise incident reports in plain English.' },
  {
    role: 'user' as const,
    content: 'Summarise: the nightly batch overran its token budget by 12%.',
  },
];

describe('POST /v1/chat/completions (non-streaming)', () => {
  it('reports usage exactly: prompt counted like the edge, completion = tokens of the reply', async () => {
    for (const [model, encoding] of [
      ['gpt-4o-mini', 'o200k_base'],
      ['gpt-4', 'cl100k_base'],
    ] as const) {
      const tokenizer = await loadTokenizer(encoding);
      const res = await mock.client().chat.completions.create({ model, messages, max_tokens: 40 });
      const content = res.choices[0]!.message.content!;
      expect(res.object).toBe('chat.completion');
      expect(res.usage!.prompt_tokens).toBe(countChatPrompt({ model, messages }, tokenizer));
      expect(res.usage!.completion_tokens).toBe(tokenizer.countText(content));
      expect(res.usage!.total_tokens).toBe(res.usage!.prompt_tokens + res.usage!.completion_tokens);
    }
    const stats = mock.upstream().stats();
    expect(stats.completed).toBe(2);
    expect(stats.usage.totalTokens).toBe(stats.billed.promptTokens + stats.billed.completionTokens);
  });

  it.each(REFERENCE_CASES.map((c) => [c.request.model, c.promptTokens, c] as const))(
    'reports what the OpenAI API reported for a published case (%s: %i)',
    async (_model, promptTokens, c) => {
      // The reference request types are the tokenizer's loose shapes; the wire format is the same.
      const request = c.request as unknown as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming;
      const res = await mock.client().chat.completions.create({ ...request, max_tokens: 1 });
      expect(res.usage!.prompt_tokens).toBe(promptTokens);
    },
  );

  it('caps at max_tokens / max_completion_tokens with finish_reason length', async () => {
    const client = mock.client();
    const headers = { 'x-mock-completion-tokens': '100' };
    const capped = await client.chat.completions.create(
      { model: 'gpt-4o', messages, max_tokens: 10 },
      { headers },
    );
    expect(capped.usage!.completion_tokens).toBe(10);
    expect(capped.choices[0]!.finish_reason).toBe('length');
    const newer = await client.chat.completions.create(
      { model: 'gpt-4o', messages, max_tokens: 50, max_completion_tokens: 7 },
      { headers },
    );
    expect(newer.usage!.completion_tokens).toBe(7);
    const free = await client.chat.completions.create(
      { model: 'gpt-4o', messages, max_tokens: 500 },
      { headers },
    );
    expect(free.usage!.completion_tokens).toBe(100);
    expect(free.choices[0]!.finish_reason).toBe('stop');
    expect(
      mock
        .upstream()
        .stats()
        .recent.map((r) => r.maxTokens),
    ).toEqual([10, 7, 500]);
  });

  it('is deterministic per prompt, and lengths follow the configured distribution', async () => {
    const client = mock.client();
    mock.upstream().configure({ completion: { mode: 'uniform', min: 5, max: 60 }, seed: 7 });
    const ask = (content: string) =>
      client.chat.completions.create({
        model: 'gpt-4o',
        messages: [{ role: 'user', content }],
        max_tokens: 100,
      });
    const [a, b, c] = [await ask('digest 1'), await ask('digest 1'), await ask('digest 2')];
    expect(b.choices[0]!.message.content).toBe(a.choices[0]!.message.content);
    expect(c.choices[0]!.message.content).not.toBe(a.choices[0]!.message.content);
    for (const r of [a, c]) {
      expect(r.usage!.completion_tokens).toBeGreaterThanOrEqual(5);
      expect(r.usage!.completion_tokens).toBeLessThanOrEqual(60);
    }
    mock.upstream().configure({ completion: { mode: 'fraction', fraction: 0.5 } });
    expect((await ask('digest 3')).usage!.completion_tokens).toBe(50);
  });

  it('answers n choices and bills all of them', async () => {
    const res = await mock
      .client()
      .chat.completions.create(
        { model: 'gpt-4o', messages, max_tokens: 20, n: 3 },
        { headers: { 'x-mock-completion-tokens': '4' } },
      );
    expect(res.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    expect(res.usage!.completion_tokens).toBe(12);
  });

  it('waits the configured first-token latency', async () => {
    const started = performance.now();
    await mock
      .client()
      .chat.completions.create(
        { model: 'gpt-4o', messages },
        { headers: { 'x-mock-latency-ms': '120' } },
      );
    expect(performance.now() - started).toBeGreaterThanOrEqual(115);
  });
});

describe('POST /v1/chat/completions (streaming)', () => {
  async function collect(
    stream: AsyncIterable<ChatCompletionChunk>,
  ): Promise<ChatCompletionChunk[]> {
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    return chunks;
  }

  it('streams like OpenAI: role first, one token per chunk, finish, then usage with include_usage', async () => {
    const stream = await mock.client().chat.completions.create(
      {
        model: 'gpt-4o-mini',
        messages,
        max_tokens: 100,
        stream: true,
        stream_options: { include_usage: true },
      },
      { headers: { 'x-mock-completion-tokens': '12' } },
    );
    const chunks = await collect(stream);
    const tokenizer = await loadTokenizer('o200k_base');
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    const contents = chunks.slice(1, -2).map((c) => c.choices[0]!.delta.content!);
    expect(contents.every((piece) => tokenizer.countText(piece) === 1)).toBe(true);
    expect(chunks.at(-2)!.choices[0]!.finish_reason).toBe('stop');
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toMatchObject({
      prompt_tokens: countChatPrompt({ model: 'gpt-4o-mini', messages }, tokenizer),
      completion_tokens: contents.length,
    });
    expect(contents).toHaveLength(12);
    expect(tokenizer.countText(contents.join(''))).toBe(12);
    expect(chunks.every((c) => c.object === 'chat.completion.chunk')).toBe(true);
    expect(mock.upstream().stats().usage.completionTokens).toBe(contents.length);
  });

  it('sends no usage chunk without include_usage, but still bills what it streamed', async () => {
    const stream = await mock
      .client()
      .chat.completions.create(
        { model: 'gpt-4o', messages, max_tokens: 5, stream: true },
        { headers: { 'x-mock-completion-tokens': '30' } },
      );
    const chunks = await collect(stream);
    expect(chunks.some((c) => c.usage)).toBe(false);
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('length');
    const stats = mock.upstream().stats();
    expect(stats.usage).toMatchObject({ promptTokens: 0, completionTokens: 0, totalTokens: 0 });
    expect(stats.billed.completionTokens).toBe(5);
    expect(stats.recent[0]).toMatchObject({
      stream: true,
      includeUsage: false,
      outcome: 'completed',
    });
  });
});

describe('POST /v1/chat/completions with audio', () => {
  // One `input_audio` part (base64 the mock does not decode; its JSON is 100+ prompt tokens).
  const spoken = [
    {
      role: 'user' as const,
      content: [
        { type: 'text' as const, text: 'Answer the question.' },
        {
          type: 'input_audio' as const,
          input_audio: { data: 'UklGRiQAAABXQVZF'.repeat(40), format: 'wav' as const },
        },
      ],
    },
  ];

  it('reports audio tokens, parts of the totals, in a JSON answer and in the usage chunk', async () => {
    const client = mock.client();
    const headers = { 'x-mock-completion-tokens': '40', 'x-mock-audio-completion-tokens': '30' };
    const body = {
      model: 'gpt-4o-audio-preview',
      messages: spoken,
      modalities: ['text' as const, 'audio' as const],
      audio: { voice: 'alloy' as const, format: 'wav' as const },
      max_tokens: 100,
    };
    const res = await client.chat.completions.create(body, { headers });
    expect(res.usage).toMatchObject({
      completion_tokens: 40,
      prompt_tokens_details: { audio_tokens: 50 },
      completion_tokens_details: { audio_tokens: 30 },
    });
    expect(res.usage!.prompt_tokens).toBeGreaterThan(50);

    const stream = await client.chat.completions.create(
      { ...body, stream: true, stream_options: { include_usage: true } },
      { headers: { ...headers, 'x-mock-audio-prompt-tokens': '7' } },
    );
    let usage: ChatCompletionChunk['usage'] | undefined;
    for await (const chunk of stream) usage = chunk.usage ?? usage;
    expect(usage).toMatchObject({
      prompt_tokens_details: { audio_tokens: 7 },
      completion_tokens_details: { audio_tokens: 30 },
    });
    const [json, streamed] = mock.upstream().stats().recent;
    expect(json).toMatchObject({ audioPromptTokens: 50, audioCompletionTokens: 30 });
    expect(streamed).toMatchObject({ audioPromptTokens: 7, audioCompletionTokens: 30 });
  });

  it('bills all the output as audio by default, capped with it; none without audio asked', async () => {
    const client = mock.client();
    const audio = await client.chat.completions.create(
      { model: 'gpt-4o-audio-preview', messages, modalities: ['text', 'audio'], max_tokens: 12 },
      { headers: { 'x-mock-completion-tokens': '100' } },
    );
    expect(audio.usage).toMatchObject({
      completion_tokens: 12,
      prompt_tokens_details: { audio_tokens: 0 },
      completion_tokens_details: { audio_tokens: 12 },
    });
    const text = await client.chat.completions.create({ model: 'gpt-4o', messages: spoken });
    expect(text.usage).toMatchObject({
      prompt_tokens_details: { audio_tokens: 50 },
      completion_tokens_details: { audio_tokens: 0 },
    });
    expect(mock.upstream().stats().billed).toMatchObject({
      audioPromptTokens: 50,
      audioCompletionTokens: 12,
    });
  });
});
