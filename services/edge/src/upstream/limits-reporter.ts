import type { UpstreamConfig } from '@holdfast/config';
import type { AuthorityClient, Logger } from '@holdfast/runtime';
import type { CountError } from './counting.js';
import type { LimitedModel } from './client.js';
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

  /**
   * `model`: the call's, when it declares a capacity of its own on the upstream; the report is
   * then about that model's limit (OpenAI's limits are per model), measured against it, and
   * shrinks or blocks that model's capacity only, not the upstream's every model shares.
   */
  seen(upstream: UpstreamConfig, seen: LimitsSeen, model?: LimitedModel, now = Date.now()): void {
    const tpm = model ? model.capacity?.tokensPerMinute : upstream.capacity?.tokensPerMinute;
    const low =
      seen.remainingTokens !== undefined && tpm !== undefined && seen.remainingTokens < tpm * LOW;
    if (seen.retryAfterMs === undefined && !low) return;
    // A 429 is never held back by an earlier report of tokens left.
    const kind = `${upstream.id}\u0000${model?.id ?? ''}\u0000${seen.retryAfterMs === undefined ? 'left' : '429'}`;
    if (now - (this.#last.get(kind) ?? 0) < EVERY_MS) return;
    this.#last.set(kind, now);
    void this.authority()
      .reportCapacity({ upstream: upstream.id, ...(model ? { model: model.id } : {}), ...seen })
      .then((r) => {
        if (!r.ok)
          this.logger.warn({ upstream: upstream.id, code: r.error.code }, 'limits not reported');
      });
  }
}

/**
 * One of a tenant's share of an upstream's `countsPerMinute`, asked of the authority (which
 * keeps the minute for every edge), as UpstreamCounter's `takeCount`: undefined to send the
 * count, or the count_limited error with when to come back. No answer (the authority down or
 * slow): sent, as before the limit was declared (a 429 from the provider still stops counting
 * for its Retry-After).
 */
export async function takeCount(
  authority: () => Pick<AuthorityClient, 'takeCount'>,
  tenant: string,
  target: UpstreamConfig,
  timeoutMs: number,
  logger: Pick<Logger, 'warn'>,
): Promise<CountError | undefined> {
  const r = await authority().takeCount({ tenant, upstream: target.id }, timeoutMs);
  if (!r.ok) {
    logger.warn({ upstream: target.id, code: r.error.code }, 'count share not asked: counting');
    return undefined;
  }
  if (r.value.taken) return undefined;
  const { retryAfterSeconds, who } = r.value;
  const whose =
    who === 'tenant'
      ? `team ${tenant} has taken its share of upstream ${target.id}'s counting limit (countsPerMinute ${target.countsPerMinute}, capacity.tenantShare), so other teams keep theirs`
      : `upstream ${target.id}'s counting limit (countsPerMinute ${target.countsPerMinute}) is taken for this team's priority`;
  return {
    code: 'count_limited',
    status: 429,
    message: `${whose} for ${retryAfterSeconds} s more`,
    retryAfterMs: retryAfterSeconds * 1_000,
  };
}
