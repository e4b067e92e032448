/** The tokenizers a model can be configured with (SPEC section 3, minus `upstream`). */
export const TOKENIZER_NAMES = ['o200k_base', 'cl100k_base', 'estimate'] as const;
export type TokenizerName = (typeof TOKENIZER_NAMES)[number];
export type EncodingName = Exclude<TokenizerName, 'estimate'>;

/** Characters per token of the pessimistic `estimate` tokenizer (SPEC section 4). */
export const ESTIMATE_CHARS_PER_TOKEN = 3;

export interface Tokenizer {
  readonly name: TokenizerName;
  /** Tokens in a plain text. Text that looks like a special token (`<|endoftext|>`) is plain text. */
  countText(text: string): number;
}

interface EncodingApi {
  countTokens(text: string, options: { disallowedSpecial: Set<string> }): number;
}

// Loaded on first use: each encoding costs about 0.5 s and 65 MB (FACTS.md).
const LOADERS: Record<EncodingName, () => Promise<{ default: EncodingApi }>> = {
  o200k_base: () => import('gpt-tokenizer/encoding/o200k_base'),
  cl100k_base: () => import('gpt-tokenizer/encoding/cl100k_base'),
};

/** Count special-token text as ordinary text, the way the API bills it, instead of throwing. */
const PLAIN_TEXT = { disallowedSpecial: new Set<string>() };

const estimate: Tokenizer = {
  name: 'estimate',
  countText: (text) => Math.ceil(text.length / ESTIMATE_CHARS_PER_TOKEN),
};

const loaded = new Map<TokenizerName, Promise<Tokenizer>>([
  ['estimate', Promise.resolve(estimate)],
]);

/** The tokenizer of that name, loading its encoding once per process (per worker thread). */
export function loadTokenizer(name: TokenizerName): Promise<Tokenizer> {
  let tokenizer = loaded.get(name);
  if (!tokenizer) {
    const encoding = name as EncodingName;
    tokenizer = LOADERS[encoding]().then(({ default: api }) => ({
      name: encoding,
      countText: (text: string) => (text.length === 0 ? 0 : api.countTokens(text, PLAIN_TEXT)),
    }));
    // A failed load is not cached, so the next call retries it.
    tokenizer.catch(() => loaded.delete(name));
    loaded.set(name, tokenizer);
  }
  return tokenizer;
}

export function isTokenizerName(value: string): value is TokenizerName {
  return (TOKENIZER_NAMES as readonly string[]).includes(value);
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
