export interface InlineGuardOptions {
  /** An inline count that takes longer than this (ms) is slow. */
  budgetMs: number;
  /** Slow time (ms) a tenant may spend at once... */
  burstMs: number;
  /** ...and a second, sustained. */
  refillMsPerSecond: number;
  /** How long a tenant past its allowance counts in the pool (ms). */
  demoteMs: number;
  /** The clock (ms), read only while some tenant counts in the pool. */
  now?: () => number;
}

/**
 * Which tenants may count inline. Some text costs a tokenizer far more a character than
 * English (base64, random CJK, one long word: 10-200x, bench/hostile-text.ts), so a prompt
 * under the inline limit can still hold the loop for tens of milliseconds. Each inline count
 * over `budgetMs` is charged its time past the budget to its tenant's allowance (a bucket of
 * `burstMs`, refilled at `refillMsPerSecond`); a tenant past it counts in the pool, in its own
 * queue, for `demoteMs`. Time, not a count of slow counts: a garbage collection or a busy
 * neighbour now and then costs a busy tenant a few milliseconds of allowance, while text that
 * is slow every time or slow by hundreds of milliseconds uses it up at once.
 */
export class InlineGuard {
  /** Tenants with a slow count lately: allowance left (ms) and when it was last refilled. */
  readonly #allowance = new Map<string, { ms: number; at: number }>();
  /** Tenants counting in the pool, until when. */
  readonly #demoted = new Map<string, number>();

  constructor(private readonly opts: InlineGuardOptions) {}

  allows(tenant: string): boolean {
    if (this.#demoted.size === 0) return true;
    const until = this.#demoted.get(tenant);
    if (until === undefined) return true;
    if (until > (this.opts.now?.() ?? performance.now())) return false;
    this.#demoted.delete(tenant);
    return true;
  }

  /** Takes note of an inline count of the tenant that took `ms`, ending at `now`. */
  counted(tenant: string, ms: number, now: number): void {
    const { budgetMs, burstMs, refillMsPerSecond, demoteMs } = this.opts;
    if (ms <= budgetMs) return;
    const last = this.#allowance.get(tenant) ?? { ms: burstMs, at: now };
    const refilled = last.ms + ((now - last.at) / 1_000) * refillMsPerSecond;
    const left = Math.min(burstMs, refilled) - (ms - budgetMs);
    if (left >= 0) {
      this.#allowance.set(tenant, { ms: left, at: now });
      return;
    }
    this.#allowance.delete(tenant);
    this.#demoted.set(tenant, now + demoteMs);
  }
}
