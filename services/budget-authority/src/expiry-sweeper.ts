import { randomUUID } from 'node:crypto';
import type { Logger } from '@holdfast/runtime';
import type { HandlerContext } from './context.js';
import { closeReservation } from './handlers/close.js';
import type { OutboxRelay } from './outbox-relay.js';
import { SlotBatch } from './redis.js';
import { flushRefusals } from './scripts.js';

/** Kinds of summarised refusals one flush call may write. */
const FLUSH_BATCH = 32;
/** Overdue holds read per org per pass. */
const EXPIRE_BATCH = 500;

/**
 * The authority's once-a-second chores for the orgs this replica relays:
 * - gives back holds whose lease ran out (a call that never settled or released: an edge that
 *   crashed mid-call), with a `reservation.expired` event each, billed at the worst case where
 *   the tenant's `onExpiry` says so. Holds are found through each org's lease index, so a hold
 *   of a tenant that moved to another org or left the config is found too. close.lua re-checks
 *   the lease, so a sweep racing a settle is harmless.
 * - writes the refusals that admissions rate-limited as summary events (`count` > 1).
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
      this.#running ??= this.#pass()
        .catch((err: unknown) => this.logger.warn({ err }, 'sweep failed'))
        .finally(() => (this.#running = undefined));
    }, this.intervalMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#running;
  }

  async #pass(): Promise<void> {
    const expired = await this.sweep();
    if (expired > 0) this.logger.info({ expired }, 'expired overdue holds');
    const summaries = await this.flushRefusals();
    if (summaries > 0) this.logger.debug({ summaries }, 'summarised refusals written');
  }

  /** One expiry pass; returns how many holds expired. */
  async sweep(): Promise<number> {
    const { redis, keys } = this.ctx;
    const orgs = this.relay.owned;
    if (orgs.length === 0) return 0;
    const now = this.ctx.clock();
    const read = new SlotBatch(redis);
    for (const org of orgs) {
      const k = keys.leases(org);
      read.add(k, (p) => p.zrangebyscore(k, '-inf', now, 'LIMIT', 0, EXPIRE_BATCH));
    }
    // Holds admitted before the lease index existed sit only in their tenants' sets.
    const legacy = [...this.ctx.config.current.tenants.values()].filter((t) =>
      orgs.includes(t.org),
    );
    for (const t of legacy) {
      const k = keys.holds(t.org, t.id);
      read.add(k, (p) => p.zrangebyscore(k, '-inf', now, 'LIMIT', 0, EXPIRE_BATCH));
    }
    const replies = await read.exec();
    const due = new Map<string, { org: string; tenant: string }>();
    replies.forEach(([err, ids], i) => {
      if (err || !Array.isArray(ids)) return;
      const org = i < orgs.length ? orgs[i]! : legacy[i - orgs.length]!.org;
      const tenant = i < orgs.length ? '' : legacy[i - orgs.length]!.id;
      for (const id of ids as string[]) if (!due.has(id)) due.set(id, { org, tenant });
    });
    let expired = 0;
    for (const [reservationId, { org, tenant }] of due) {
      const r = await closeReservation(this.ctx, { tenant, org, reservationId }, { op: 'expire' });
      if (r.ok && r.value.status === ('expired' as string)) {
        expired += 1;
        this.ctx.metrics.closes.inc({ op: 'expire', status: 'expired' });
      }
    }
    return expired;
  }

  /** Writes every org's pending refusal summaries; returns how many events were written. */
  async flushRefusals(): Promise<number> {
    const { redis, keys } = this.ctx;
    const orgs = this.relay.owned;
    if (orgs.length === 0) return 0;
    const lengths = new SlotBatch(redis);
    for (const org of orgs) {
      const k = keys.refusals(org);
      lengths.add(k, (p) => p.hlen(k));
    }
    const replies = await lengths.exec();
    let written = 0;
    for (const [i, [err, n]] of replies.entries()) {
      if (err || typeof n !== 'number' || n === 0) continue;
      const org = orgs[i]!;
      for (;;) {
        const ids = Array.from({ length: FLUSH_BATCH }, () => randomUUID());
        const w = await flushRefusals(redis, keys.outbox(org), keys.refusals(org), ids);
        written += w;
        this.ctx.metrics.refusalsSummarised.inc(w);
        if (w < FLUSH_BATCH) break;
      }
    }
    return written;
  }
}
