import { randomUUID } from 'node:crypto';
import { every, type Logger, type Periodic } from '@holdfast/runtime';
import type { HandlerContext } from './context.js';
import { closeReservation } from './handlers/close.js';
import type { OutboxRelay } from './outbox-relay.js';
import type { Keys } from './keys.js';
import { SlotBatch, type RedisClient } from './redis.js';
import { flushRefusals } from './scripts.js';

/**
 * Kinds of summarised refusals one flush call may write. A call reads the org's whole summary
 * hash, so the sweep sizes each call by the hash's length (read with the overdue holds) up to
 * this: a flush is then one call for up to this many kinds, not one per 32 (each re-reading the
 * hash: 1,000 kinds cost 42 ms a flush in calls of 32, 10 ms in one).
 */
const FLUSH_BATCH = 1_024;
/** Overdue holds read per org per pass. */
const EXPIRE_BATCH = 500;

/**
 * An overdue hold's org, its tenant when it was found in a tenant's own set, and `legacy` when
 * it was found in the org's old lease index (keys.ts legacyLeases), which this pass drains.
 */
interface Hold {
  org: string;
  tenant: string;
  legacy?: boolean;
}

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
  #timer: Periodic | undefined;

  constructor(
    private readonly ctx: HandlerContext,
    private readonly relay: OutboxRelay,
    private readonly logger: Logger,
    private readonly intervalMs = 1_000,
  ) {}

  start(): void {
    this.#timer = every(this.intervalMs, () => this.#pass(), {
      logger: this.logger,
      failed: 'sweep failed',
    });
  }

  async stop(): Promise<void> {
    await this.#timer?.stop();
  }

  async #pass(): Promise<void> {
    const { due, refusing } = await this.#read(true);
    const expired = await this.#expire(due);
    if (expired > 0) this.logger.info({ expired }, 'expired overdue holds');
    const summaries = await this.#flushRefusals(refusing);
    if (summaries > 0) this.logger.debug({ summaries }, 'summarised refusals written');
  }

  /** One expiry pass; returns how many holds expired. */
  async sweep(): Promise<number> {
    return this.#expire((await this.#read(false)).due);
  }

  /**
   * Reads, in one round trip per Redis node, the holds whose lease ran out and (`refusals`)
   * the orgs with refusals to summarise. An idle authority makes this one read a second.
   */
  async #read(
    refusals: boolean,
  ): Promise<{ due: Map<string, Hold>; refusing: Array<{ org: string; kinds: number }> }> {
    const { redis, keys } = this.ctx;
    const orgs = this.relay.owned;
    if (orgs.length === 0) return { due: new Map(), refusing: [] };
    const now = this.ctx.clock();
    const read = new SlotBatch(redis);
    // The org's lease index is its root level's in-flight set (whoever holds it: tenant '').
    // Holds admitted before the lease index existed sit only in their tenants' sets; holds an
    // authority from before issue 14's cut admitted are also in the old index, drained here
    // (its due ids are in the root's set too: expired from there, only taken out of it).
    const legacy = [...this.ctx.config.current.tenants.values()].filter(
      (t) => orgs.includes(t.org) && t.id !== t.org,
    );
    const holds = [
      ...orgs.map((org) => ({ org, tenant: '', key: keys.leases(org), legacy: false })),
      ...orgs.map((org) => ({ org, tenant: '', key: keys.legacyLeases(org), legacy: true })),
      ...legacy.map((t) => ({
        org: t.org,
        tenant: t.id,
        key: keys.holds(t.org, t.id),
        legacy: false,
      })),
    ];
    for (const { key } of holds) {
      read.add(key, (p) => p.zrangebyscore(key, '-inf', now, 'LIMIT', 0, EXPIRE_BATCH));
    }
    if (refusals) {
      for (const org of orgs) {
        const k = keys.refusals(org);
        read.add(k, (p) => p.hlen(k));
      }
    }
    const replies = await read.exec();
    const due = new Map<string, Hold>();
    holds.forEach(({ org, tenant, legacy: old }, i) => {
      const [err, ids] = replies[i]!;
      if (err || !Array.isArray(ids)) return;
      for (const id of ids as string[]) {
        const seen = due.get(id);
        if (!seen) due.set(id, old ? { org, tenant, legacy: true } : { org, tenant });
        else if (old) seen.legacy = true;
      }
    });
    // The hash holds two fields a kind (its count and its last refusal's fields).
    const refusing = replies
      .slice(holds.length)
      .flatMap(([err, n], i) =>
        err || typeof n !== 'number' || n === 0 ? [] : [{ org: orgs[i]!, kinds: Math.ceil(n / 2) }],
      );
    return { due, refusing };
  }

  async #expire(due: Map<string, Hold>): Promise<number> {
    let expired = 0;
    for (const [reservationId, { org, tenant, legacy }] of due) {
      const r = await closeReservation(this.ctx, { tenant, org, reservationId }, { op: 'expire' });
      if (r.ok && r.value.status === ('expired' as string)) {
        expired += 1;
        this.ctx.metrics.closes.inc({ op: 'expire', status: 'expired' });
      }
      // Whatever the close said: a hold still live (renewed since) is in its root level's set,
      // the index now, and one closed has no business in either.
      if (r.ok && legacy) await this.ctx.redis.zrem(this.ctx.keys.legacyLeases(org), reservationId);
    }
    return expired;
  }

  /** Writes the pending refusal summaries of `orgs`; returns how many events were written. */
  async #flushRefusals(orgs: ReadonlyArray<{ org: string; kinds: number }>): Promise<number> {
    let written = 0;
    for (const { org, kinds } of orgs) {
      const w = await summariseRefusals(this.ctx.redis, this.ctx.keys, org, kinds);
      written += w;
      this.ctx.metrics.refusalsSummarised.inc(w);
    }
    return written;
  }
}

/**
 * Writes an org's rate-limited refusals (`kinds` of them, about: its summary hash's length) as
 * summary events into its outbox (lua/refusals.lua); returns how many events it wrote. The
 * sweeper's, and `rebuild --force`'s before it deletes the hash.
 */
export async function summariseRefusals(
  redis: RedisClient,
  keys: Keys,
  org: string,
  kinds: number,
): Promise<number> {
  let written = 0;
  // Kinds counted since the length was read are written by the next call, or the next pass.
  let batch = Math.min(FLUSH_BATCH, kinds + 1);
  for (;;) {
    const ids = Array.from({ length: batch }, () => randomUUID());
    const w = await flushRefusals(redis, keys.outbox(org), keys.refusals(org), ids);
    written += w;
    if (w < batch) return written;
    batch = FLUSH_BATCH;
  }
}
