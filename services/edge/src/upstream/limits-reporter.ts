import type { UpstreamConfig } from '@holdfast/config';
import type { AuthorityClient, Logger } from '@holdfast/runtime';
import type { LimitsSeen } from './retry.js';

/** A provider's word on its limits is passed on at most this often per upstream. */
const EVERY_MS = 1_000;
/** Remaining tokens are worth reporting once they are below this share of the declared limit. */
const LOW = 0.1;

/**
 * Passes what providers say of their limits to the authority, which lowers the capacity it
 * admits against (upstream capacity, docs/budgets.md): a 429 blocks the upstream for its
 * Retry-After, and a low `x-ratelimit-remaining-tokens` lowers the usable capacity until its
 * reset. At most once a second per upstream; fire and forget (a lost report only means the
 * provider's next 429 is the signal).
 */
export class LimitsReporter {
  readonly #last = new Map<string, number>();

  constructor(
    private readonly authority: () => AuthorityClient,
    private readonly logger: Logger,
  ) {}

  seen(upstream: UpstreamConfig, seen: LimitsSeen, now = Date.now()): void {
    const tpm = upstream.capacity?.tokensPerMinute;
    const low =
      seen.remainingTokens !== undefined && tpm !== undefined && seen.remainingTokens < tpm * LOW;
    if (seen.retryAfterMs === undefined && !low) return;
    // A 429 is never held back by an earlier report of tokens left.
    const kind = `${upstream.id}\u0000${seen.retryAfterMs === undefined ? 'left' : '429'}`;
    if (now - (this.#last.get(kind) ?? 0) < EVERY_MS) return;
    this.#last.set(kind, now);
    void this.authority()
      .reportCapacity({ upstream: upstream.id, ...seen })
      .then((r) => {
        if (!r.ok)
          this.logger.warn({ upstream: upstream.id, code: r.error.code }, 'limits not reported');
      });
  }
}
