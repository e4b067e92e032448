import type { Tokenizer as FullTokenizer } from '@holdfast/tokenizer';

type Tokenizer = Pick<FullTokenizer, 'countText'>;

/** Counts a text exactly somewhere else (the upstream's own tokenizer); undefined: cannot. */
type RemoteCount = (text: string) => Promise<number | undefined>;

export interface OutputMeterOptions {
  /**
   * Decides when the output passed its limit: the model's own tokenizer when the edge has it
   * (exact), else an efficient real tokenizer (o200k), which an honest upstream's count
   * practically never falls below, so such a call is not cut early, while an upstream that
   * writes past max_tokens is cut close to it.
   */
  cut: Tokenizer;
  /** true when `cut` is the model's own tokenizer: its count is the truth. */
  exact: boolean;
  /**
   * What the edge bills when the provider reports no usage: the model's tokenizer, else the
   * proven upper bound (`estimate`), so the books never show less than may have been spent.
   */
  bill: Tokenizer;
  /** The upstream's own count (`tokenizer: upstream`): asked before a cut, and for the bill. */
  remote?: RemoteCount;
}

/**
 * The output of one call as it streams: every text the model writes (content, reasoning, tool
 * calls), by choice. Counting is lazy: a token covers at least one UTF-8 byte, so the text is
 * only counted once the bytes not yet counted could reach the limit, and a long reply is
 * counted in a few batches instead of once per chunk.
 */
export class OutputMeter {
  readonly #o: OutputMeterOptions;
  readonly #texts = new Map<number, string[]>();
  readonly #pending = new Map<number, string[]>();
  #pendingBytes = 0;
  #counted = 0;
  /** An exact count the upstream confirmed for everything before `#pendingBytes` started. */
  #confirmed = false;

  constructor(opts: OutputMeterOptions) {
    this.#o = opts;
  }

  add(choice: number, text: string): void {
    if (text.length === 0) return;
    let all = this.#texts.get(choice);
    if (!all) this.#texts.set(choice, (all = []));
    all.push(text);
    let pending = this.#pending.get(choice);
    if (!pending) this.#pending.set(choice, (pending = []));
    pending.push(text);
    this.#pendingBytes += Buffer.byteLength(text);
  }

  /** Output tokens so far by the cut counter (pending text counted now). */
  get counted(): number {
    if (this.#pendingBytes > 0) {
      // Each choice's deltas are one text: count them joined, as the provider does.
      for (const pending of this.#pending.values()) {
        if (pending.length > 0) this.#counted += this.#o.cut.countText(pending.join(''));
      }
      this.#pending.clear();
      this.#pendingBytes = 0;
    }
    return this.#counted;
  }

  /** Whether the output, by the cut counter, has passed `limit` tokens. */
  overLimit(limit: number): boolean {
    if (this.#counted + this.#pendingBytes <= limit) return false;
    return this.counted > limit;
  }

  /**
   * Whether the output really passed `limit`: the cut counter's word when it is exact or no
   * upstream count exists; otherwise the upstream counts the whole output, and a count within
   * the limit replaces the local one (so the next check waits for new text).
   */
  async confirmOver(limit: number): Promise<boolean> {
    if (this.#o.exact || !this.#o.remote) return this.overLimit(limit);
    const remote = await this.#o.remote(this.text());
    if (remote === undefined) return this.overLimit(limit);
    this.#counted = remote;
    this.#pending.clear();
    this.#pendingBytes = 0;
    this.#confirmed = true;
    return remote > limit;
  }

  /** Whether the output is counted exactly (the model's tokenizer, or the upstream's count). */
  get exact(): boolean {
    return this.#o.exact || this.#o.remote !== undefined;
  }

  /** Whether a cut needs the upstream's word first (an async check). */
  get verifiable(): boolean {
    return !this.#o.exact && this.#o.remote !== undefined;
  }

  /** All output text, choices joined in order (for the upstream's count). */
  text(): string {
    return [...this.#texts.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, t]) => t.join(''))
      .join('');
  }

  /** The output to bill when the provider reports none: exact, else the proven bound. */
  async billable(): Promise<number> {
    if (this.#o.remote && !this.#o.exact) {
      const remote = await this.#o.remote(this.text());
      if (remote !== undefined) return remote;
    }
    let n = 0;
    for (const texts of this.#texts.values()) n += this.#o.bill.countText(texts.join(''));
    if (this.#o.exact) return n;
    // The bound never counts less than the cut counter did (nor than an upstream confirmed).
    return this.#confirmed ? Math.max(n, this.#counted) : Math.max(n, this.counted);
  }
}
