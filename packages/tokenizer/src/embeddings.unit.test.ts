import { describe, expect, it } from 'vitest';
import { countEmbeddingInput } from './embeddings.js';
import { loadTokenizer } from './tokenizers.js';

describe('countEmbeddingInput', () => {
  it('sums texts, counts token arrays by length, and has no framing', async () => {
    const cl100k = await loadTokenizer('cl100k_base');
    // OpenAI cookbook, How_to_count_tokens_with_tiktoken.ipynb section 5: 6 tokens in cl100k_base.
    expect(countEmbeddingInput('antidisestablishmentarianism', cl100k)).toBe(6);
    expect(countEmbeddingInput(['antidisestablishmentarianism', '2 + 2 = 4'], cl100k)).toBe(6 + 7);
    expect(countEmbeddingInput([519, 85342, 34500], cl100k)).toBe(3);
    expect(countEmbeddingInput([[1, 2, 3], [4]], cl100k)).toBe(4);
    expect(countEmbeddingInput('<|endoftext|>', cl100k)).toBeGreaterThan(1);
  });

  it('bounds each text by its UTF-8 bytes, a dummy prefix and two special tokens', async () => {
    const estimate = await loadTokenizer('estimate');
    expect(countEmbeddingInput(['abcd', 'ab'], estimate)).toBe(4 + 1 + 2 + (2 + 1 + 2));
  });
});
