import type { Hold } from '../authority/holds.js';
import type { AuthorityPort } from './ports.js';

/**
 * Keeps a running call's hold from expiring: once half its lease has passed, the edge renews
 * it (a new lease from now), and again each half lease after. So no call the config allows,
 * however long its upstream runs, is expired (and billed at its worst case) while its edge is
 * still streaming it; an edge that dies stops renewing and the lease does its job.
 */
export class LeaseKeeper {
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(
    private readonly authority: AuthorityPort,
    private readonly hold: Hold,
    private readonly log: { warn(obj: object, msg: string): void },
  ) {}

  /** Starts renewing; `expiresAt` and `leaseMs` come from the admission. */
  start(expiresAtMs: number, leaseMs: number, now = Date.now()): this {
    this.#schedule(Math.max(250, (expiresAtMs - now) / 2), leaseMs);
    return this;
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #schedule(delayMs: number, leaseMs: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => void this.#renew(leaseMs), delayMs);
    this.#timer.unref();
  }

  async #renew(leaseMs: number): Promise<void> {
    if (this.#stopped || this.hold.closed) return;
    const { reservationId, tenant, org } = this.hold.ref;
    const r = await this.authority.renew({ reservationId, tenant, org });
    if (r.ok && r.value.status === 'renewed') return this.#schedule(leaseMs / 2, leaseMs);
    if (r.ok) return; // closed or unknown: nothing to keep alive
    this.log.warn({ ...this.hold.ref, code: r.error.code }, 'lease renewal failed; retrying');
    this.#schedule(Math.min(30_000, leaseMs / 4), leaseMs);
  }
}
