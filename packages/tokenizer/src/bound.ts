/**
 * Upper bounds on the tokens any shipped (or OpenAI) tokenizer can give a string or a JSON
 * value, computed from UTF-8 bytes. The proof, in short (docs/budgets.md has it in full):
 *
 * 1. Byte-level BPE (o200k, cl100k, Llama 3, Qwen, DeepSeek, Mistral tekken) encodes the UTF-8
 *    bytes of its (normalized) input and every token decodes to at least one byte, so a text
 *    has at most as many tokens as bytes.
 * 2. BPE or SentencePiece with byte fallback (Gemma, Llama 2, older Mistral) gives each piece at
 *    least one character and an unknown character at most one token per UTF-8 byte; the
 *    SentencePiece dummy prefix (a leading "▁") can add one piece per encoded text.
 * 3. A normalizer can make the text longer before (1) or (2) apply: Qwen runs NFC, some
 *    SentencePiece models NFKC, and both can expand a character (U+1D160 is 4 bytes, 12 after
 *    NFC; U+FDFA is 3 bytes, 33 after NFKC). So the bound counts the longest of the raw, NFC
 *    and NFKC forms. ASCII is unchanged by both, which keeps the common case cheap.
 *
 * Not covered: tokenizers that case-fold or otherwise rewrite text (BERT uncased); no chat
 * model we know of does.
 */

/** Matches any character NFC or NFKC could change (everything outside ASCII). */
const NON_ASCII = /[^\p{ASCII}]/u;

/** The most UTF-8 bytes the text can have after an NFC or NFKC normalizer. */
function normalizedBytes(text: string): number {
  const raw = Buffer.byteLength(text, 'utf8');
  if (!NON_ASCII.test(text)) return raw;
  return Math.max(
    raw,
    Buffer.byteLength(text.normalize('NFC'), 'utf8'),
    Buffer.byteLength(text.normalize('NFKC'), 'utf8'),
  );
}

/** At most this many tokens for the text in any supported tokenizer (bytes + a dummy prefix). */
export function textBound(text: string): number {
  return text.length === 0 ? 0 : normalizedBytes(text) + 1;
}

/**
 * A string a template may emit raw or JSON-quoted (`| tojson`): the bound of the raw text plus
 * what quoting adds (2 quotes and escapes: `\"`, `\n`, `\u0001` is 6 bytes for 1).
 */
export function stringBound(text: string): number {
  const quoted = JSON.stringify(text);
  return textBound(text) + Buffer.byteLength(quoted, 'utf8') - Buffer.byteLength(text, 'utf8');
}

/**
 * Python prints any number it parsed from JSON in at most 24 characters (the longest float repr,
 * `-1.2345678901234567e-308`; integers come from JSON.stringify, so at most 22 digits and sign).
 */
const NUMBER_BYTES = 24;

/**
 * Bound on a JSON value as a chat template renders it with `tojson`, at any indent up to 4
 * (Llama 3.1 uses `tojson(indent=4)`; compact or `", "` separators are shorter): every string
 * bounded as above, every number as 24 bytes, and per item the separator, a newline and four
 * spaces per level of nesting.
 */
export function jsonBound(value: unknown, depth = 0): number {
  if (typeof value === 'string') return stringBound(value);
  if (typeof value === 'number' || typeof value === 'bigint') return NUMBER_BYTES;
  if (typeof value === 'boolean' || value === null || value === undefined) return 6;
  const perItem = 2 + 4 * (depth + 1) + 2; // ",\n", the indent, and ": " after a key
  let total = 2 + 1 + 4 * depth; // brackets, the closing newline and its indent
  if (Array.isArray(value)) {
    for (const item of value as unknown[]) total += perItem + jsonBound(item, depth + 1);
    return total;
  }
  if (typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      total += perItem + stringBound(key) + jsonBound(item, depth + 1);
    }
    return total;
  }
  // A function or symbol cannot come from parsed JSON; count it as its (absent) JSON.
  return 0;
}

/** The value a server parses from a JSON string (tool-call arguments), or the string itself. */
export function parseJsonOrSelf(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
