/** Texts longer than this are counted every time (one would crowd the others out). */
const MAX_TEXT_CHARS = 65_536;

export interface CountCacheLimits {
  /** Texts kept, at most. */
  maxEntries: number;
  /** Characters kept in all, at most (UTF-16: twice this in bytes). */
  maxChars: number;
}

const DEFAULT_LIMITS: CountCacheLimits = { maxEntries: 4_096, maxChars: 4_000_000 };

/**
 * The exact counts of the prompt texts seen last, for one tokenizer. A deployment sends the
 * same system prompt, tool definitions and few-shot turns with call after call, and a BPE count
 * is a pure function of the text: a repeated text costs a map lookup instead of its encoding.
 * Bounded in entries and characters, least recently used out first; the texts never leave the
 * process (no log, no metric).
 */
export class CountCache {
  readonly #counts = new Map<string, number>();
  #chars = 0;

  constructor(
    private readonly countText: (text: string) => number,
    private readonly limits: CountCacheLimits = DEFAULT_LIMITS,
  ) {}

  count(text: string): number {
    const hit = this.#counts.get(text);
    if (hit !== undefined) {
      // Most recently used last: eviction takes the map's first entries.
      this.#counts.delete(text);
      this.#counts.set(text, hit);
      return hit;
    }
    const n = this.countText(text);
    if (text.length <= MAX_TEXT_CHARS && text.length <= this.limits.maxChars) {
      this.#counts.set(text, n);
      this.#chars += text.length;
      this.#evict();
    }
    return n;
  }

  get size(): number {
    return this.#counts.size;
  }

  get chars(): number {
    return this.#chars;
  }

  #evict(): void {
    const { maxEntries, maxChars } = this.limits;
    for (const oldest of this.#counts.keys()) {
      if (this.#counts.size <= maxEntries && this.#chars <= maxChars) return;
      this.#counts.delete(oldest);
      this.#chars -= oldest.length;
    }
  }
}

const caches = new WeakMap<object, CountCache>();

/** The prompt-count cache of a tokenizer (one per tokenizer object, per thread). */
export function promptCounts(tokenizer: { countText(text: string): number }): CountCache {
  let cache = caches.get(tokenizer);
  if (!cache) caches.set(tokenizer, (cache = new CountCache((t) => tokenizer.countText(t))));
  return cache;
}
