import { loadTokenizer } from '@holdfast/tokenizer';
import { describe, expect, it } from 'vitest';
import { completionPieces, wantedTokens, WORDS } from './generate.js';

describe('generated text', () => {
  it('is one token per piece in both encodings, so completion_tokens is exact', async () => {
    for (const encoding of ['o200k_base', 'cl100k_base'] as const) {
      const tokenizer = await loadTokenizer(encoding);
      for (const word of WORDS) {
        const capital = word[0]!.toUpperCase() + word.slice(1);
        expect([` ${word}`, capital].map((w) => tokenizer.countText(w))).toEqual([1, 1]);
      }
      for (const seed of [1, 2, 3, 99]) {
        expect(tokenizer.countText(completionPieces(seed, 500).join(''))).toBe(500);
      }
    }
  });

  it('draws lengths from the configured distribution, the same for the same seed', () => {
    const spec = { mode: 'uniform', min: 10, max: 20 } as const;
    const lengths = Array.from({ length: 200 }, (_, seed) => wantedTokens(spec, 1000, seed));
    expect(Math.min(...lengths)).toBe(10);
    expect(Math.max(...lengths)).toBe(20);
    expect(wantedTokens(spec, 1000, 42)).toBe(wantedTokens(spec, 1000, 42));
    expect(wantedTokens({ mode: 'fraction', fraction: 0.25 }, 1024, 1)).toBe(256);
  });
});
