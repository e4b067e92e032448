import { estimateChatPrompt, ESTIMATE_INPUT_SPECIALS } from './estimate.js';
import { textBound } from './bound.js';
import { loadFamily, type FamilyName } from './family/index.js';
import type { ChatPromptRequest } from './types.js';

/** The tokenizers a model can be configured with (docs/configuration.md, minus `upstream`). */
export type TokenizerName = 'o200k_base' | 'cl100k_base' | 'estimate' | FamilyName;
export type EncodingName = 'o200k_base' | 'cl100k_base';

export interface Tokenizer {
  readonly name: TokenizerName;
  /**
   * Tokens in a plain text, with no BOS or other special token added. Text that looks like a
   * special token (`<|endoftext|>`, `<|eot_id|>`) is plain text.
   */
  countText(text: string): number;
  /**
   * Prompt tokens of a whole chat request, for tokenizers that frame chats themselves (a
   * model's chat template, the `estimate` bound). Absent for OpenAI encodings: chat.ts frames
   * those the way the OpenAI API does.
   */
  readonly countChat?: (request: ChatPromptRequest) => number;
  /** Special tokens a server adds around each embeddings input (BOS, EOS). */
  readonly inputSpecials: number;
}

interface EncodingApi {
  countTokens(text: string, options: { disallowedSpecial: Set<string> }): number;
}

// Loaded on first use: each encoding costs about 0.5 s and 65 MB (measured, docs/benchmarks.md).
const LOADERS: Record<EncodingName, () => Promise<{ default: EncodingApi }>> = {
  o200k_base: () => import('gpt-tokenizer/encoding/o200k_base'),
  cl100k_base: () => import('gpt-tokenizer/encoding/cl100k_base'),
};

/** Count special-token text as ordinary text, the way the API bills it, instead of throwing. */
const PLAIN_TEXT = { disallowedSpecial: new Set<string>() };

/**
 * An upper bound on every shipped tokenizer (and OpenAI's), for models with no known
 * tokenizer: a token per UTF-8 byte (bound.ts has the proof) plus the framing of every chat
 * template (estimate.ts).
 */
const estimate: Tokenizer = {
  name: 'estimate',
  countText: textBound,
  countChat: estimateChatPrompt,
  inputSpecials: ESTIMATE_INPUT_SPECIALS,
};

const loaded = new Map<TokenizerName, Promise<Tokenizer>>();
/** The tokenizers whose load has finished in this thread, for counting without an await. */
const ready = new Map<TokenizerName, Tokenizer>();

/**
 * The tokenizer of that name, loading its vocabulary once per process (per worker thread).
 * Open-weight families take 0.4-1.4 s and 100-240 MB each to load (bench/family-load.ts).
 */
export function loadTokenizer(name: TokenizerName): Promise<Tokenizer> {
  let tokenizer = loaded.get(name);
  if (!tokenizer) {
    if (name === 'estimate') tokenizer = Promise.resolve(estimate);
    else tokenizer = isEncodingName(name) ? loadEncoding(name) : loadFamilyTokenizer(name);
    // A failed load is not cached, so the next call retries it.
    tokenizer.then(
      (t) => ready.set(name, t),
      () => loaded.delete(name),
    );
    loaded.set(name, tokenizer);
  }
  return tokenizer;
}

/** The tokenizer of that name if this thread has finished loading it, else undefined. */
export function loadedTokenizer(name: TokenizerName): Tokenizer | undefined {
  return ready.get(name);
}

async function loadEncoding(name: EncodingName): Promise<Tokenizer> {
  const { default: api } = await LOADERS[name]();
  return {
    name,
    countText: (text) => (text.length === 0 ? 0 : api.countTokens(text, PLAIN_TEXT)),
    inputSpecials: 0,
  };
}

async function loadFamilyTokenizer(name: FamilyName): Promise<Tokenizer> {
  // Yield once so that a caller's synchronous work runs before the (blocking) load.
  await Promise.resolve();
  const family = loadFamily(name);
  return {
    name,
    countText: (text) => family.countText(text),
    countChat: (request) => family.countChat(request),
    inputSpecials: family.inputSpecials,
  };
}

function isEncodingName(name: TokenizerName): name is EncodingName {
  return name === 'o200k_base' || name === 'cl100k_base';
}

/**
 * The encoding OpenAI uses for a model name: `cl100k_base` for the GPT-4 (not 4o/4.1/4.5),
 * GPT-3.5 and embedding families, `o200k_base` for everything newer and anything unknown.
 */
export function encodingForModel(model: string): EncodingName {
  const m = model.toLowerCase();
  if (m.startsWith('gpt-3.5') || m.startsWith('text-embedding-')) return 'cl100k_base';
  if (m.startsWith('gpt-4') && !/^gpt-4(o|\.\d|-o)/.test(m)) return 'cl100k_base';
  return 'o200k_base';
}
