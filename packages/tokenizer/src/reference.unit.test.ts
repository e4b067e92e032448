import { beforeAll, describe, expect, it } from 'vitest';
import { countChatPrompt } from './chat.js';
import { REFERENCE_CASES } from './reference-cases.js';
import { encodingForModel, loadTokenizer, type Tokenizer } from './tokenizers.js';
import {
  claudeImageTokens,
  imageTokensFor,
  patchCount,
  tileCount,
  visionCostFor,
} from './vision.js';

/**
 * Counts that OpenAI (or its documentation) published. Each case names its source; the chat
 * cases live in reference-cases.ts (exported, for end-to-end tests) with their sources.
 */

let o200k: Tokenizer;
let cl100k: Tokenizer;
beforeAll(async () => {
  [o200k, cl100k] = await Promise.all([loadTokenizer('o200k_base'), loadTokenizer('cl100k_base')]);
});

describe('prompt_tokens reported by the OpenAI API (REFERENCE_CASES)', () => {
  it.each(REFERENCE_CASES.map((c) => [c.source, c.request.model, c.promptTokens, c] as const))(
    '%s, %s: %i',
    (_source, _model, promptTokens, c) => {
      const tokenizer = c.encoding === 'o200k_base' ? o200k : cl100k;
      expect(encodingForModel(c.request.model)).toBe(c.encoding);
      expect(countChatPrompt(c.request, tokenizer)).toBe(promptTokens);
    },
  );

  it('counts the section 7 tools the same when passed as legacy `functions`', () => {
    const { request } = REFERENCE_CASES.find(
      (c) => c.request.tools && c.encoding === 'o200k_base',
    )!;
    const functions = request.tools!.map((t) => t.function!);
    expect(countChatPrompt({ ...request, tools: null, functions }, o200k)).toBe(101);
  });
});

describe('encodings, as tiktoken prints them', () => {
  // Source: the same notebook, sections 3 and 5 ("Comparing encodings").
  it.each([
    ['tiktoken is great!', 'o200k', 6],
    ['antidisestablishmentarianism', 'cl100k', 6],
    ['antidisestablishmentarianism', 'o200k', 6],
    ['2 + 2 = 4', 'cl100k', 7],
    ['2 + 2 = 4', 'o200k', 7],
    ['お誕生日おめでとう', 'cl100k', 9],
    ['お誕生日おめでとう', 'o200k', 8],
  ] as const)('%j in %s: %i tokens', (text, encoding, tokens) => {
    expect((encoding === 'o200k' ? o200k : cl100k).countText(text)).toBe(tokens);
  });
});

describe('image costs from OpenAI vision docs', () => {
  // Source: platform.openai.com/docs/guides/images-vision, "Calculating costs" (GPT-4o tile
  // scheme): 1024x1024 high = 765, 2048x4096 high = 1105, any size low = 85.
  const gpt4o = visionCostFor('gpt-4o');
  it('tiles: 1024x1024 high costs 765, 2048x4096 high 1105, low 85', () => {
    expect(tileCount({ width: 1024, height: 1024 })).toBe(4);
    expect(imageTokensFor(gpt4o, { width: 1024, height: 1024 }, 'high')).toBe(765);
    expect(imageTokensFor(gpt4o, { width: 2048, height: 4096 }, 'high')).toBe(1105);
    expect(imageTokensFor(gpt4o, { width: 4096, height: 8192 }, 'low')).toBe(85);
  });

  // Same page, patch scheme (gpt-4.1-mini, gpt-4.1-nano, o4-mini): 1024x1024 is 1024 patches;
  // 1800x2400 is scaled down to 1056x1408, 1452 patches.
  it('patches: 1024x1024 is 1024 patches, 1800x2400 is 1452', () => {
    expect(patchCount({ width: 1024, height: 1024 })).toBe(1024);
    expect(patchCount({ width: 1800, height: 2400 })).toBe(1452);
    expect(
      imageTokensFor(visionCostFor('gpt-4.1-mini'), { width: 1024, height: 1024 }, 'high'),
    ).toBe(Math.ceil(1024 * 1.62));
  });
});

describe("image costs from Anthropic's vision docs", () => {
  // Source: docs.anthropic.com, "Vision", "Evaluate image size": tokens = width x height / 750;
  // the largest sizes kept unscaled per aspect ratio are 1092x1092 (1:1, ~1,590 tokens) and
  // 784x1568 (1:2, ~1,639); a long edge over 1,568 px is scaled down first.
  const claude = visionCostFor('claude-opus-4-1');
  it('pixels: 1092x1092 costs 1,590, 784x1568 1,640, and nothing costs more', () => {
    expect(claudeImageTokens({ width: 1092, height: 1092 })).toBe(1590);
    expect(claudeImageTokens({ width: 200, height: 200 })).toBe(54);
    expect(imageTokensFor(claude, { width: 784, height: 1568 }, 'high')).toBe(1640);
    expect(imageTokensFor(claude, { width: 4000, height: 4000 }, 'low')).toBe(1640);
    expect(imageTokensFor(claude, undefined, 'auto')).toBe(1640);
  });
});
