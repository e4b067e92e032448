import type { CompletionLength } from './behaviour.js';

/**
 * Deterministic output. Each word is exactly one token in o200k_base and cl100k_base, both as
 * " word" and as "Word" at the start (checked by a unit test), and words never merge across
 * the space, so a reply of n words is n tokens and one stream chunk carries one token.
 */
export const WORDS: readonly string[] = (
  'the budget team report model token stream limit window policy review audit quarter summary ' +
  'digest risk issue level number price cost value share plan account market money month week ' +
  'year day time order group system public point state people work place world life house city ' +
  'water power light data first last new old small large great good right long still well also ' +
  'only very'
).split(' ');

/** FNV-1a, 32 bits. */
export function hash32(text: string, seed = 0): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/** mulberry32: a small seeded PRNG returning floats in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** The reply's pieces, one token each: "Word", " word", " word", ... */
export function completionPieces(seed: number, tokens: number): string[] {
  const next = prng(seed);
  const pieces: string[] = [];
  for (let i = 0; i < tokens; i++) {
    const word = WORDS[Math.floor(next() * WORDS.length)] ?? 'the';
    pieces.push(i === 0 ? word[0]!.toUpperCase() + word.slice(1) : ` ${word}`);
  }
  return pieces;
}

/** Tokens the model "wants" to write before the cap applies. */
export function wantedTokens(spec: CompletionLength, cap: number, seed: number): number {
  switch (spec.mode) {
    case 'fixed':
      return spec.tokens;
    case 'fraction':
      return Math.round(cap * spec.fraction);
    case 'uniform':
      return spec.min + Math.floor(prng(seed)() * (spec.max - spec.min + 1));
  }
}

/** Reasoning effort as a multiple of the configured `medium` amount. */
const EFFORT = { none: 0, minimal: 0.25, low: 0.5, medium: 1, high: 2, xhigh: 4 } as const;

/** Reasoning tokens for a requested effort; 0 when the request asks for none. */
export function reasoningFor(effort: unknown, medium: number): number {
  if (typeof effort !== 'string' || !(effort in EFFORT)) return 0;
  return Math.round(medium * EFFORT[effort as keyof typeof EFFORT]);
}

/**
 * Deterministic tool-call arguments, `{"input":"Word word ..."}`, of at most `maxTokens`
 * tokens, in stream pieces that carry their share of the count: one per word, the rest of the
 * whole text's count on the opening piece. So the pieces add up to the bill and a cut stream
 * bills what it sent. Empty when not even the braces fit.
 */
export function toolArguments(
  seed: number,
  maxTokens: number,
  count: (text: string) => number,
): { json: string; pieces: { text: string; tokens: number }[]; tokens: number } {
  const build = (words: number) => {
    const texts = completionPieces(seed, words);
    const json = `{"input":"${texts.join('')}"}`;
    const frame = Math.max(0, count(json) - words);
    const pieces = [
      { text: '{"input":"', tokens: frame },
      ...texts.map((text) => ({ text, tokens: 1 })),
      { text: '"}', tokens: 0 },
    ];
    return { json, pieces, tokens: frame + words };
  };
  let words = Math.max(0, maxTokens - count('{"input":""}'));
  let args = build(words);
  while (args.tokens > maxTokens && words > 0) {
    words = Math.max(0, words - (args.tokens - maxTokens));
    args = build(words);
  }
  return args.tokens > maxTokens ? { json: '', pieces: [], tokens: 0 } : args;
}
