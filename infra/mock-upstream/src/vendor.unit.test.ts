import { describe, expect, it } from 'vitest';
import { call, useMockUpstream } from '../test/harness.js';

const mock = useMockUpstream();
const messages = [{ role: 'user', content: 'Write the weekly budget digest.' }];

interface ChatReply {
  choices: { message: { content: string }; finish_reason: string }[];
  usage: { prompt_tokens: number; completion_tokens: number };
  error?: { message: string; param: string | null };
}

/** A chat call with a body the official client would not build. */
async function chat(body: Record<string, unknown>, headers: Record<string, string> = {}) {
  const res = await call(
    mock.upstream(),
    'POST',
    '/v1/chat/completions',
    {
      model: 'gpt-4o-mini',
      messages,
      ...body,
    },
    headers,
  );
  return { status: res.status, json: res.json as ChatReply, text: res.text };
}

const long = { 'x-mock-completion-tokens': '400' };

describe('vendor length fields', () => {
  it.each([
    ['n_predict', { n_predict: 150 }],
    ['options.num_predict', { options: { num_predict: 150 } }],
    ['max_new_tokens', { max_new_tokens: 150 }],
    ['parameters.max_new_tokens', { parameters: { max_new_tokens: 150 } }],
  ])('%s overrides max_tokens, as the server that reads it does', async (field, extra) => {
    const { json } = await chat({ max_tokens: 16, ...extra }, long);
    expect(json.usage.completion_tokens).toBe(150);
    expect(json.choices[0]!.finish_reason).toBe('length');
    const record = mock.upstream().stats().recent[0]!;
    expect(record).toMatchObject({ maxTokens: 16, outputCap: 150, completionTokens: 150 });
    expect(Object.keys(record.vendorFields)).toEqual([field]);
  });

  it('n_predict also lowers the cap, and -1 lifts it to the server maximum', async () => {
    expect((await chat({ max_tokens: 300, n_predict: 5 }, long)).json.usage.completion_tokens).toBe(
      5,
    );
    const unlimited = await chat({ max_tokens: 10, n_predict: -1 }, long);
    expect(unlimited.json.usage.completion_tokens).toBe(400);
    expect(unlimited.json.choices[0]!.finish_reason).toBe('stop');
  });

  it('Ollama num_predict -2 fills the context (the server maximum)', async () => {
    mock.upstream().configure({ maxOutputTokens: 64 });
    const { json } = await chat({ max_tokens: 8, options: { num_predict: -2 } });
    expect(json.usage.completion_tokens).toBe(64);
  });

  it('ignore_eos writes to the cap; min_tokens lengthens a short reply', async () => {
    const eos = await chat(
      { max_tokens: 90, ignore_eos: true },
      { 'x-mock-completion-tokens': '3' },
    );
    expect(eos.json.usage.completion_tokens).toBe(90);
    const min = await chat({ max_tokens: 90, min_tokens: 40 }, { 'x-mock-completion-tokens': '3' });
    expect(min.json.usage.completion_tokens).toBe(40);
  });

  it('refuses min_tokens above the cap, as vLLM does', async () => {
    const { status, json } = await chat({ max_tokens: 10, min_tokens: 11 });
    expect(status).toBe(400);
    expect(json.error).toMatchObject({ param: 'min_tokens' });
    expect(mock.upstream().stats().recent).toHaveLength(0);
  });
});

describe('vendor count fields', () => {
  it('best_of generates and bills every candidate, returning n', async () => {
    const { json } = await chat(
      { max_tokens: 20, n: 2, best_of: 5 },
      { 'x-mock-completion-tokens': '6' },
    );
    expect(json.choices).toHaveLength(2);
    expect(json.usage.completion_tokens).toBe(30);
    expect(mock.upstream().stats().recent[0]).toMatchObject({ choices: 2, candidates: 5 });
  });

  it('n_cmpl (llama-server) wins over n', async () => {
    const { json } = await chat(
      { max_tokens: 20, n: 1, n_cmpl: 3 },
      { 'x-mock-completion-tokens': '4' },
    );
    expect(json.choices).toHaveLength(3);
    expect(json.usage.completion_tokens).toBe(12);
  });

  it('best_of below n is refused', async () => {
    expect((await chat({ n: 3, best_of: 2 })).status).toBe(400);
  });

  it('a stream with best_of bills the hidden candidates too, before the first token', async () => {
    const res = await chat(
      { max_tokens: 20, best_of: 3, stream: true, stream_options: { include_usage: true } },
      { 'x-mock-completion-tokens': '5' },
    );
    const usageChunk = res.text
      .split('\n\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)) as { usage?: { completion_tokens: number } })
      .find((c) => c.usage);
    expect(usageChunk?.usage?.completion_tokens).toBe(15);
    expect(mock.upstream().stats().billed.completionTokens).toBe(15);
  });
});

describe('a misbehaving upstream', () => {
  it('ignores max_tokens when told to (header or config)', async () => {
    const { json } = await chat({ max_tokens: 10 }, { 'x-mock-ignore-max-tokens': '250' });
    expect(json.usage.completion_tokens).toBe(250);
    expect(json.choices[0]!.finish_reason).toBe('stop');
    mock.upstream().configure({ ignoreMaxTokens: 33, overReport: { completionTokens: 1 } });
    expect((await chat({ max_tokens: 1, n_predict: 2 })).json.usage.completion_tokens).toBe(34);
  });

  it('over-reports usage and bills what it reports; the log keeps the truth', async () => {
    const { json } = await chat(
      { max_tokens: 50 },
      {
        'x-mock-completion-tokens': '10',
        'x-mock-overreport-prompt': '7',
        'x-mock-overreport-completion': '5',
        'x-mock-overreport-factor': '2',
      },
    );
    const record = mock.upstream().stats().recent[0]!;
    expect(json.usage.completion_tokens).toBe(25);
    expect(json.usage.prompt_tokens).toBe(record.actual.promptTokens * 2 + 7);
    expect(record).toMatchObject({ completionTokens: 25, actual: { completionTokens: 10 } });
    expect(json.choices[0]!.message.content.split(' ')).toHaveLength(10);
    expect(mock.upstream().stats().billed.completionTokens).toBe(25);
  });

  it('reports cached prompt tokens and reasoning tokens inside the cap', async () => {
    const { json } = await chat(
      { max_completion_tokens: 100, reasoning_effort: 'high' },
      {
        'x-mock-cached-tokens': '5',
        'x-mock-reasoning-tokens': '30',
        'x-mock-completion-tokens': '500',
      },
    );
    expect(json.usage).toMatchObject({
      completion_tokens: 100,
      prompt_tokens_details: { cached_tokens: 5 },
      completion_tokens_details: { reasoning_tokens: 60 },
    });
    expect(json.choices[0]!.message.content.split(' ')).toHaveLength(40);
    expect(mock.upstream().stats().billed).toMatchObject({ cachedTokens: 5, reasoningTokens: 60 });
  });
});
