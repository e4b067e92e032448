import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { TokenizerLoader, type NSTokenizerConfig, type NSTokenizerJSON } from '@lenml/tokenizers';

type LenmlTokenizer = ReturnType<typeof TokenizerLoader.fromPreTrained>;

/**
 * One open-weight vocabulary (a Hugging Face tokenizer.json and tokenizer_config.json shipped
 * in an `@lenml/tokenizer-*` package), with the counts the family tokenizers need:
 * - `countParsed`: the text the way a server tokenizes a rendered chat prompt (Hugging Face
 *   `encode(prompt, add_special_tokens=False)`, vLLM, llama.cpp): special-token text such as
 *   `<|eot_id|>` becomes that special token, wherever it came from;
 * - `countPlain`: special-token text counted as ordinary text, the way a server that does not
 *   parse special tokens in user content (mistral-common, `split_special_tokens`) counts it.
 *   Non-special added tokens (Qwen's `<think>`, Gemma's `<unusedN>`) are ordinary vocabulary
 *   and stay single tokens in both.
 */
export interface Vocab {
  readonly config: NSTokenizerConfig.Root;
  countParsed(text: string): number;
  countPlain(text: string): number;
  /** Splits text into pieces, each either a special token's text or text without one. */
  splitSpecials(text: string): string[];
  isSpecial(piece: string): boolean;
  /** Token ids of the text as `countParsed` counts it (for tests against published ids). */
  encodeParsed(text: string): number[];
  /** Special tokens `encode(text)` adds around one input (BOS, EOS) outside a chat. */
  readonly inputSpecials: number;
}

function readJson<T>(path: string): T {
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}

/**
 * Loads a vocabulary from a package's `models/tokenizer.json` and the `tokenizer_config.json`
 * beside it. Reading the JSON (rather than importing the
 * package, which embeds it as a JavaScript object literal) loads about 25% faster and keeps
 * 40-150 MB less resident (bench/family-load.ts).
 */
export function loadVocab(tokenizerJsonPath: string): Vocab {
  const tokenizerJSON = readJson<NSTokenizerJSON.Root>(tokenizerJsonPath);
  const config = readJson<NSTokenizerConfig.Root>(
    join(dirname(tokenizerJsonPath), 'tokenizer_config.json'),
  );
  const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig: config });
  const special = new Set(tok.added_tokens.filter((t) => t.special).map((t) => t.content));
  const plain = plainCounter(tok);
  const encodeParsed = (text: string) => tok.encode(text, { add_special_tokens: false });
  return {
    config,
    countParsed: (text) => (text.length === 0 ? 0 : encodeParsed(text).length),
    countPlain: plain,
    splitSpecials: (text) => tok.added_tokens_splitter.split(text),
    isSpecial: (piece) => special.has(piece),
    encodeParsed,
    inputSpecials: tok.encode('a').length - encodeParsed('a').length,
  };
}

/**
 * Counts text with special tokens as plain text. The engine always splits every added token
 * out before its normalizer, pre-tokenizer and model run (`_encode_text`); this does the same
 * steps but splits out only the non-special added tokens. The families shipped have no added
 * token that strips whitespace and no lowercasing, the two steps skipped here; a test checks
 * that text with no special-token text counts the same both ways.
 */
function plainCounter(tok: LenmlTokenizer): (text: string) => number {
  const encodeRun = (text: string): number => {
    if (text.length === 0) return 0;
    const normalized = tok.normalizer ? tok.normalizer._call(text) : text;
    if (normalized.length === 0) return 0;
    const pieces = tok.pre_tokenizer ? tok.pre_tokenizer._call(normalized, {}) : [normalized];
    return tok.model._call(pieces).length;
  };
  return (text) => {
    let count = 0;
    let run = '';
    for (const section of tok.added_tokens_splitter.split(text)) {
      const added = tok.added_tokens_map.get(section);
      if (added && !added.special) {
        count += encodeRun(run) + 1;
        run = '';
      } else run += section;
    }
    return count + encodeRun(run);
  };
}
