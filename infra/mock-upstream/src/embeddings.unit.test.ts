import { countEmbeddingInput, loadTokenizer } from '@holdfast/tokenizer';
import { describe, expect, it } from 'vitest';
import { useMockUpstream } from '../test/harness.js';

const mock = useMockUpstream();

describe('POST /v1/embeddings', () => {
  it('counts input tokens in the model encoding and returns one unit vector per input', async () => {
    const cl100k = await loadTokenizer('cl100k_base');
    const input = ['antidisestablishmentarianism', 'お誕生日おめでとう'];
    // The openai client asks for base64 and decodes it to floats.
    const res = await mock.client().embeddings.create({ model: 'text-embedding-3-small', input });
    expect(res.usage).toEqual({ prompt_tokens: 15, total_tokens: 15 });
    expect(countEmbeddingInput(input, cl100k)).toBe(15);
    expect(res.data).toHaveLength(2);
    const v = res.data[0]!.embedding;
    expect(v).toHaveLength(1536);
    expect(Math.hypot(...v)).toBeCloseTo(1, 4);
  });

  it('is deterministic and honours dimensions, float format and token input', async () => {
    const client = mock.client();
    const a = await client.embeddings.create({
      model: 'text-embedding-3-small',
      input: 'x',
      dimensions: 8,
    });
    const b = await client.embeddings.create({
      model: 'text-embedding-3-small',
      input: 'x',
      dimensions: 8,
      encoding_format: 'float',
    });
    expect(a.data[0]!.embedding).toHaveLength(8);
    expect(b.data[0]!.embedding.map((x) => x.toFixed(5))).toEqual(
      a.data[0]!.embedding.map((x) => x.toFixed(5)),
    );
    const tokens = await client.embeddings.create({
      model: 'text-embedding-3-small',
      input: [1, 2, 3],
    });
    expect(tokens.usage.prompt_tokens).toBe(3);
    expect(tokens.data).toHaveLength(1);
  });

  it('fails on demand like the chat route', async () => {
    const err = await mock
      .client()
      .embeddings.create(
        { model: 'text-embedding-3-small', input: 'x' },
        { headers: { 'x-mock-fail': '500' } },
      )
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 500 });
  });
});

describe('GET /v1/models', () => {
  it('lists the configured models', async () => {
    const page = await mock.client().models.list();
    expect(page.data.map((m) => m.id)).toContain('gpt-4o-mini');
    expect((await mock.client().models.retrieve('gpt-4o')).id).toBe('gpt-4o');
    await expect(mock.client().models.retrieve('nope')).rejects.toMatchObject({ status: 404 });
  });
});
