import type { Logger } from '@holdfast/runtime';
import type { HandlerContext } from './context.js';
import { closeReservation } from './handlers/close.js';
import type { OutboxRelay } from './outbox-relay.js';

/**
 * Gives back holds whose lease ran out (a call that never settled or released: an edge that
 * crashed mid-call). Each sweep expires overdue holds of the orgs this replica relays, with a
 * `reservation.expired` event each. close.lua re-checks the lease, so a sweep racing a settle
 * is harmless.
 */
export class ExpirySweeper {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;

  constructor(
    private readonly ctx: HandlerContext,
    private readonly relay: OutboxRelay,
    private readonly logger: Logger,
    private readonly intervalMs = 1_000,
  ) {}

  start(): void {
    this.#timer = setInterval(() => {
      this.#running ??= this.sweep()
        .then((n) => {
          if (n > 0) this.logger.info({ expired: n }, 'expired overdue holds');
        })
        .catch((err: unknown) => this.logger.warn({ err }, 'expiry sweep failed'))
        .finally(() => (this.#running = undefined));
    }, this.intervalMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#running;
  }

  /** One pass; returns how many holds expired. */
  async sweep(): Promise<number> {
    const cfg = this.ctx.config.current;
    const owned = new Set(this.relay.owned);
    const now = this.ctx.clock();
    let expired = 0;
    for (const tenant of cfg.tenants.values()) {
      if (!owned.has(tenant.org)) continue;
      const due = await this.ctx.redis.zrangebyscore(
        this.ctx.keys.holds(tenant.org, tenant.id),
        '-inf',
        now,
        'LIMIT',
        0,
        500,
      );
      for (const id of due) {
        const r = await closeReservation(this.ctx, tenant.id, id, { op: 'expire' });
        if (r.ok && r.value.status === ('expired' as string)) {
          expired += 1;
          this.ctx.metrics.closes.inc({ op: 'expire', status: 'expired' });
        }
      }
    }
    return expired;
  }
}
