import { beforeAll, describe, expect, it } from 'vitest';
import { chatRequests, CORPUS } from '../test/corpus.js';
import { countChatPrompt } from './chat.js';
import { estimateChatPrompt } from './estimate.js';
import { FAMILY_NAMES, loadFamily, type FamilyName } from './family/index.js';
import type { FamilyCounter } from './family/family.js';
import { loadTokenizer, type Tokenizer } from './tokenizers.js';

/**
 * The `estimate` bound against every real tokenizer shipped (and OpenAI's), on the corpus of
 * hard texts (test/corpus.ts), alone and in chat requests with tools, tool calls and images.
 */

let estimate: Tokenizer;
const real: Tokenizer[] = [];
const families = new Map<FamilyName, FamilyCounter>();
beforeAll(async () => {
  estimate = await loadTokenizer('estimate');
  real.push(await loadTokenizer('o200k_base'), await loadTokenizer('cl100k_base'));
  for (const name of FAMILY_NAMES) {
    real.push(await loadTokenizer(name));
    families.set(name, loadFamily(name));
  }
}, 60_000);

const samples = Object.entries(CORPUS);

describe('estimate bounds every tokenizer on each text', () => {
  it.each(samples)('%s', (_name, text) => {
    const bound = estimate.countText(text);
    for (const tokenizer of real) {
      expect(bound, tokenizer.name).toBeGreaterThanOrEqual(tokenizer.countText(text));
    }
    for (const [name, family] of families) {
      // Parsed as special tokens too (a server tokenizing a rendered prompt).
      expect(bound, name).toBeGreaterThanOrEqual(family.vocab.countParsed(text));
    }
  });
});

describe('estimate bounds every chat framing on requests built from each text', () => {
  it.each(samples)('%s', (_name, text) => {
    for (const [kind, request] of Object.entries(chatRequests(text))) {
      const bound = estimateChatPrompt(request);
      for (const tokenizer of real) {
        expect(bound, `${kind}, ${tokenizer.name}`).toBeGreaterThanOrEqual(
          countChatPrompt(request, tokenizer),
        );
      }
    }
  });
});

describe('what the bound costs', () => {
  it('is between 3x and 6x o200k for English prose and code', () => {
    const o200k = real[0]!;
    for (const name of ['prose', 'code TypeScript', 'code Python']) {
      const text = CORPUS[name]!;
      const ratio = estimate.countText(text) / o200k.countText(text);
      expect(ratio, name).toBeGreaterThan(2.5);
      expect(ratio, name).toBeLessThan(6);
    }
  });
});
