import { describe, expect, it } from 'vitest';
import { countChatPrompt } from './chat.js';
import { CountCache } from './count-cache.js';
import { loadTokenizer } from './tokenizers.js';
import { REFERENCE_CASES } from './reference-cases.js';

function counting() {
  const seen: string[] = [];
  return { seen, count: (text: string) => (seen.push(text), text.length) };
}

describe('CountCache', () => {
  it('counts a repeated text once and answers it the same', () => {
    const c = counting();
    const cache = new CountCache(c.count);
    expect([cache.count('system prompt'), cache.count('system prompt'), cache.count('a')]).toEqual([
      13, 13, 1,
    ]);
    expect(c.seen).toEqual(['system prompt', 'a']);
  });

  it('keeps at most its entries and characters, the least recently used out first', () => {
    const c = counting();
    const cache = new CountCache(c.count, { maxEntries: 2, maxChars: 1_000 });
    cache.count('aa');
    cache.count('bb');
    cache.count('aa'); // now the most recent
    cache.count('cc'); // evicts bb
    expect(cache.size).toBe(2);
    cache.count('aa');
    cache.count('bb');
    expect(c.seen).toEqual(['aa', 'bb', 'cc', 'bb']);

    const small = new CountCache(c.count, { maxEntries: 100, maxChars: 5 });
    small.count('xyz');
    small.count('uvw'); // 6 characters: xyz goes
    expect([small.size, small.chars]).toEqual([1, 3]);
    small.count('longer than five');
    expect([small.size, small.chars]).toEqual([1, 3]);
  });

  it('counts every reference prompt as OpenAI did, the second time from the cache too', async () => {
    const tokenizers = {
      o200k_base: await loadTokenizer('o200k_base'),
      cl100k_base: await loadTokenizer('cl100k_base'),
    };
    for (const ref of REFERENCE_CASES) {
      const tokenizer = tokenizers[ref.encoding];
      expect(countChatPrompt(ref.request, tokenizer)).toBe(ref.promptTokens);
      expect(countChatPrompt(structuredClone(ref.request), tokenizer)).toBe(ref.promptTokens);
    }
  });
});
