import type { Tokenizer } from './tokenizers.js';
import type { EmbeddingInput } from './types.js';

/**
 * Prompt tokens of an Embeddings `input`: the sum over its texts (no framing, but the BOS/EOS a
 * server adds to each text for open-weight models), or the length of already tokenized input.
 */
export function countEmbeddingInput(input: EmbeddingInput, tokenizer: Tokenizer): number {
  if (typeof input === 'string') return tokenizer.countText(input) + tokenizer.inputSpecials;
  let total = 0;
  for (const item of input) {
    if (typeof item === 'string') total += tokenizer.countText(item) + tokenizer.inputSpecials;
    else if (typeof item === 'number') total += 1;
    else total += item.length;
  }
  return total;
}
