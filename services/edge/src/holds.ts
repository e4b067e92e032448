import { setTimeout as sleep } from 'node:timers/promises';
import type { ReleaseReason, SettleOutcome, Usage } from '@holdfast/events';
import type { AuthorityClient, Logger } from '@holdfast/runtime';
import type { EdgeMetrics } from './metrics.js';

export type Close =
  | { how: 'settle'; usage: Usage; outcome: SettleOutcome }
  | { how: 'release'; reason: ReleaseReason };

export interface HoldsOptions {
  authority: AuthorityClient;
  logger: Logger;
  metrics: EdgeMetrics;
  /** Timeout of one settle/release request. */
  timeoutMs: number;
  /** Attempts before the hold is left to its lease. */
  attempts: number;
  /** First backoff between attempts; doubles, capped at 5 s. */
  backoffMs?: number;
}

/** Errors after which the same settle/release may succeed later. */
const RETRYABLE = new Set(['timeout', 'no_responders', 'budget_store_unavailable']);

/**
 * Closes reservations: every settle or release runs in the background with retries (the
 * authority makes both idempotent), so the client's response never waits for it. `drain()`
 * waits for the ones still running, at shutdown.
 */
export class Holds {
  readonly #o: HoldsOptions;
  readonly #pending = new Set<Promise<void>>();

  constructor(opts: HoldsOptions) {
    this.#o = opts;
  }

  /** A hold for an admitted reservation; closing it twice is a no-op. */
  open(reservationId: string, tenant: string): Hold {
    this.#o.metrics.inFlight.inc();
    return new Hold(reservationId, tenant, (close) => {
      this.#o.metrics.inFlight.dec();
      return this.close(reservationId, tenant, close);
    });
  }

  /** Runs one close in the background, tracked until it is answered or given up. */
  close(reservationId: string, tenant: string, close: Close): Promise<void> {
    const run = this.#run(reservationId, tenant, close).finally(() => this.#pending.delete(run));
    this.#pending.add(run);
    return run;
  }

  get pending(): number {
    return this.#pending.size;
  }

  async drain(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all([...this.#pending]);
  }

  async #run(reservationId: string, tenant: string, close: Close): Promise<void> {
    const { authority, logger, metrics, timeoutMs, attempts } = this.#o;
    const label = close.how === 'settle' ? close.outcome : close.reason;
    for (let attempt = 1; ; attempt++) {
      const reply =
        close.how === 'settle'
          ? await authority.settle(
              { reservationId, tenant, usage: close.usage, outcome: close.outcome },
              timeoutMs,
            )
          : await authority.release({ reservationId, tenant, reason: close.reason }, timeoutMs);
      if (reply.ok) {
        metrics.holdsClosed.inc({ how: close.how, outcome: label });
        const { status } = reply.value;
        if (status === 'already_expired' || (status === 'unknown' && close.how === 'settle')) {
          logger.warn({ reservationId, tenant, status, close }, 'hold closed too late');
        }
        return;
      }
      const { code } = reply.error;
      if (!RETRYABLE.has(code) || attempt >= attempts) {
        metrics.holdCloseFailures.inc({ how: close.how });
        logger.error(
          { reservationId, tenant, code, attempt, close },
          `${close.how} failed; the hold's lease will give it back`,
        );
        return;
      }
      await sleep(Math.min(5_000, (this.#o.backoffMs ?? 100) * 2 ** (attempt - 1)));
    }
  }
}

/** One admitted call's reservation, closed exactly once. */
export class Hold {
  #closed = false;

  constructor(
    readonly reservationId: string,
    readonly tenant: string,
    private readonly onClose: (close: Close) => Promise<void>,
  ) {}

  /** A call served without a reservation (failOpen, authority unreachable): nothing to close. */
  static unmetered(reservationId: string, tenant: string): Hold {
    return new Hold(reservationId, tenant, () => Promise.resolve());
  }

  get closed(): boolean {
    return this.#closed;
  }

  settle(usage: Usage, outcome: SettleOutcome): void {
    this.#close({ how: 'settle', usage, outcome });
  }

  release(reason: ReleaseReason): void {
    this.#close({ how: 'release', reason });
  }

  #close(close: Close): void {
    if (this.#closed) return;
    this.#closed = true;
    void this.onClose(close);
  }
}
