import { eventSubject, type EventType, type NatsNames } from '@holdfast/events';
import { Backoff, sleep, type RetryPolicy } from '@holdfast/retry';
import {
  DeadLetters,
  errorMessage,
  JETSTREAM_OP_TIMEOUT_MS,
  JetStreamPublisher,
  type Logger,
  type Publish,
} from '@holdfast/runtime';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Redis } from 'ioredis';
import { isCluster, keysBySlot, type RedisClient } from './redis.js';
import type { ConfigStore } from './config-store.js';
import { deleteRiding } from './cork.js';
import type { Keys } from './keys.js';
import type { AuthorityMetrics } from './metrics.js';
import { decodeOutboxEntry, outboxFlat } from './outbox.js';
import { claimLease, unclaimLease } from './scripts.js';

/** Redis Cluster: the pause between two polls that found nothing, ms. */
const POLL_IDLE_MS = 20;

/**
 * Longest XREAD BLOCK, ms. A read blocks until the leases are due for renewal (a third of the
 * lease), at most this long: an idle relay wakes about once a lease third, not five times a
 * second (issue 14). New entries end the block at once.
 */
const MAX_BLOCK_MS = 2_000;

/**
 * Between two failed rounds: 50 ms doubling to 500 ms, back to 50 ms after a round that
 * worked. A round fails at once while the events stream elects a leader (no responders, 4-9 s
 * on NATS 2.9): retried every half second, its events follow the new leader within that.
 */
const ROUND_RETRY: RetryPolicy = { initialMs: 50, maxMs: 500 };

export interface RelayOptions {
  redis: RedisClient;
  /** The events' and the dead letters' publishes and their acks (JetStreamPublisher). */
  nc: NatsConnection;
  names: NatsNames;
  keys: Keys;
  config: ConfigStore;
  logger: Logger;
  metrics: AuthorityMetrics;
  replicaId: string;
  /** Lease of an org's relay; another replica takes over this long after a crash. */
  leaseMs?: number;
  /** Most events read per outbox per round. */
  batch?: number;
  /** Pause after a round smaller than a batch, ms (events wait at most this long more). */
  pauseMs?: number;
}

/**
 * Publishes outbox entries to JetStream, in order, with `Nats-Msg-Id` = event id, and deletes
 * them once JetStream acknowledged them (in the write of the authority's next command, when one
 * comes during the pause: see #relayOnce). One replica relays an org at a time (a lease in
 * Redis). A crash between publish and delete republishes on restart; JetStream's duplicate
 * window drops the copy, so nothing is lost and nothing is doubled. An entry that does not
 * validate (a bug) becomes a dead letter in the one dead-letter stream and leaves the outbox
 * only once JetStream has stored it.
 */
export class OutboxRelay {
  readonly #o: RelayOptions;
  /** XREAD BLOCK's own connection; none on Redis Cluster, where the relay polls per slot. */
  readonly #blocking: Redis | undefined;
  readonly #leaseMs: number;
  readonly #batch: number;
  readonly #pauseMs: number;
  readonly #letters: DeadLetters;
  readonly #publisher: JetStreamPublisher;
  #owned: string[] = [];
  #claimedAt = 0;
  #running = false;
  #loop: Promise<void> | undefined;

  constructor(opts: RelayOptions) {
    this.#o = opts;
    this.#leaseMs = opts.leaseMs ?? 5_000;
    this.#batch = opts.batch ?? 1_000;
    this.#pauseMs = opts.pauseMs ?? 5;
    this.#publisher = new JetStreamPublisher(opts.nc);
    this.#letters = new DeadLetters({
      nc: opts.nc,
      names: opts.names,
      service: 'budget-authority',
      source: 'outbox-relay',
      logger: opts.logger,
    });
    // XREAD BLOCK holds its connection; give it its own. On Redis Cluster one XREAD cannot
    // span the orgs' slots, and a blocked read would stall the node's shared connection.
    if (!isCluster(opts.redis)) {
      // ioredis's command timeout also bounds a blocked read: give it the block on top.
      const timeoutMs = opts.redis.options.commandTimeout;
      this.#blocking = opts.redis.duplicate({
        enableOfflineQueue: true,
        commandTimeout: timeoutMs === undefined ? undefined : timeoutMs + MAX_BLOCK_MS,
      });
      this.#blocking.on('error', (err: Error) =>
        opts.logger.debug({ err: err.message }, 'relay connection error'),
      );
    }
  }

  /** Orgs this replica relays (and sweeps) right now. */
  get owned(): readonly string[] {
    return this.#owned;
  }

  start(): void {
    this.#running = true;
    this.#loop = this.#run();
  }

  async stop(): Promise<void> {
    this.#running = false;
    this.#blocking?.disconnect();
    await this.#loop;
    this.#publisher.close();
    // Hand the leases over at once instead of making the others wait for them to lapse.
    await Promise.all(
      this.#owned.map((org) =>
        unclaimLease(this.#o.redis, this.#o.keys.relayLock(org), this.#o.replicaId).catch(() => 0),
      ),
    );
  }

  /**
   * Takes or renews the lease of every org. An org whose Redis node does not answer (a master
   * down on Redis Cluster) is simply not owned this round: the others are relayed on.
   */
  async #claim(): Promise<void> {
    const orgs = await this.#o.config.orgs();
    const results = await Promise.allSettled(
      orgs.map((org) =>
        claimLease(this.#o.redis, this.#o.keys.relayLock(org), this.#o.replicaId, this.#leaseMs),
      ),
    );
    this.#owned = orgs.filter((_, i) => {
      const r = results[i];
      return r?.status === 'fulfilled' && r.value === 1;
    });
    if (results.some((r) => r.status === 'rejected')) this.#o.metrics.relayErrors.inc();
    this.#claimedAt = Date.now();
  }

  async #run(): Promise<void> {
    const backoff = new Backoff(ROUND_RETRY);
    while (this.#running) {
      try {
        if (Date.now() - this.#claimedAt > this.#leaseMs / 3) await this.#claim();
        if (this.#owned.length === 0) {
          await sleep(this.#leaseMs / 3);
          continue;
        }
        const untilClaim = this.#leaseMs / 3 - (Date.now() - this.#claimedAt);
        const blockMs = Math.ceil(Math.min(MAX_BLOCK_MS, Math.max(1, untilClaim)));
        // Under a trickle of events, wait a moment so the next round carries a batch: one
        // XREAD, one pipelined publish and one XDEL for many events instead of one each.
        const { relayed, deleted } = await this.#relayOnce(blockMs, (n) =>
          n < this.#batch ? this.#pauseMs : 0,
        );
        await Promise.all([deleted, relayed > 0 && relayed < this.#batch && sleep(this.#pauseMs)]);
        backoff.reset();
      } catch (err) {
        if (!this.#running) break;
        this.#o.metrics.relayErrors.inc();
        this.#o.logger.warn({ err }, 'outbox relay round failed; retrying');
        await sleep(backoff.next());
      }
    }
  }

  /**
   * Reads whatever the owned outboxes hold (waiting up to `blockMs`), relays it, says how much;
   * `deleted` settles once what JetStream stored has left the outboxes. With `appendfsync
   * always` every pass of Redis's loop that writes pays an AOF write and an fsync (~100 µs of
   * Redis's CPU here, against a few µs for the XDEL itself), and an XDEL sent as the acks came
   * back was a pass of its own. It now waits, up to the pause that follows a round of `n`
   * events (`waitMs(n)`), for the authority's next command on the connection (an admit's or a
   * settle's script call, a lease renewal) and goes in its write: one pass, one fsync. The next
   * round starts once the deletes are answered, as before, so it never reads them again.
   */
  async #relayOnce(
    blockMs: number,
    waitMs: (n: number) => number,
  ): Promise<{ relayed: number; deleted: Promise<unknown> }> {
    const keys = this.#owned.map((org) => this.#o.keys.outbox(org));
    const reply = this.#blocking
      ? await this.#blocking.xread(
          'COUNT',
          this.#batch,
          'BLOCK',
          blockMs,
          'STREAMS',
          ...keys,
          ...keys.map(() => '0'),
        )
      : await this.#poll(keys, blockMs);
    if (!reply) return { relayed: 0, deleted: Promise.resolve() };
    const relayed = reply.reduce((n, [, entries]) => n + entries.length, 0);
    const deletes: Promise<unknown>[] = [];
    try {
      for (const [key, entries] of reply) {
        const done = await this.#publish(key, entries);
        if (done.length === 0) continue;
        // Redis Cluster: deleted at once, one outbox after the other, as before (a cluster
        // client is not corked itself; riding there would need the key's node's turn).
        if (isCluster(this.#o.redis)) {
          await this.#o.redis.xdel(key, ...done);
          continue;
        }
        const deleted = deleteRiding(this.#o.redis, key, done, waitMs(relayed));
        // Awaited with the round's others (below, or by the caller): not unhandled meanwhile.
        deleted.catch(() => undefined);
        deletes.push(deleted);
      }
    } catch (err) {
      // The outboxes relayed before the one that failed are deleted all the same.
      await Promise.allSettled(deletes);
      throw err;
    }
    return { relayed, deleted: Promise.all(deletes) };
  }

  /**
   * Redis Cluster: one XREAD per slot, all at once; when every outbox is empty, a short pause
   * stands in for BLOCK (an event waits at most that long more).
   */
  async #poll(keys: string[], blockMs: number): Promise<[string, [string, string[]][]][] | null> {
    const reads = await Promise.allSettled(
      keysBySlot(this.#o.redis, keys).map((group) =>
        this.#o.redis.xread('COUNT', this.#batch, 'STREAMS', ...group, ...group.map(() => '0')),
      ),
    );
    // A slot whose master is down waits for the next round; the others go on.
    const failed = reads.filter((r) => r.status === 'rejected');
    if (failed.length === reads.length && failed[0]) throw failed[0].reason;
    if (failed.length > 0) this.#o.metrics.relayErrors.inc();
    const reply = reads.flatMap((r) => (r.status === 'fulfilled' ? (r.value ?? []) : []));
    if (reply.length > 0) return reply;
    await sleep(Math.min(blockMs, POLL_IDLE_MS));
    return null;
  }

  /**
   * Publishes one outbox's entries and returns the ids JetStream stored (for the caller to
   * delete). The events go all or none (a failed publish keeps every entry, so the order holds
   * on the next round); an invalid entry whose dead letter was not stored stays behind and
   * fails the round, so the relay backs off and tries it again.
   */
  async #publish(key: string, entries: [string, string[]][]): Promise<string[]> {
    const { names, config } = this.#o;
    const events: Publish[] = [];
    // Each invalid entry's dead letter: its id when the letter was not stored (kept).
    const parked: Promise<string | undefined>[] = [];
    for (const [id, fields] of entries) {
      let event;
      try {
        event = decodeOutboxEntry(fields, config.current);
      } catch (err) {
        parked.push(this.#park(key, id, fields, err).then((r) => (r === 'kept' ? id : undefined)));
        continue;
      }
      events.push({
        subject: eventSubject(names, event.tenant, event.type),
        data: JSON.stringify(event),
        msgId: event.id,
      });
    }
    // Published in outbox order on one connection, so JetStream stores them in that order.
    const [, ...parks] = await Promise.all([
      this.#publisher.publish(events, JETSTREAM_OP_TIMEOUT_MS),
      ...parked,
    ]);
    const kept = new Set(parks);
    const done = entries.filter(([id]) => !kept.has(id)).map(([id]) => id);
    this.#o.metrics.published.inc(events.length);
    if (done.length < entries.length) {
      if (done.length > 0) await this.#o.redis.xdel(key, ...done);
      throw new Error(`${key}: a dead letter was not stored; its entry stays in the outbox`);
    }
    return done;
  }

  /** A bug, never input: the raw entry becomes a dead letter (inspectable, replayable once fixed). */
  async #park(key: string, id: string, raw: string[], err: unknown) {
    const fields = outboxFlat(raw);
    const entry: Record<string, string> = {};
    for (let i = 0; i + 1 < fields.length; i += 2) entry[fields[i]!] = fields[i + 1]!;
    const { tenant, type } = entry;
    this.#o.metrics.relayErrors.inc();
    try {
      await this.#letters.publish(
        JSON.stringify(entry),
        {
          reason: `outbox entry does not validate: ${errorMessage(err)}`,
          // The subject it was meant for, as far as the entry tells (the type may be the bug).
          subject:
            tenant && type ? eventSubject(this.#o.names, tenant, type as EventType) : undefined,
          outboxEntry: `${key} ${id}`,
        },
        `outbox-relay.${key}.${id}`,
      );
    } catch (publishErr) {
      this.#o.logger.error(
        { err: errorMessage(publishErr), entry, key, id },
        'outbox entry does not validate and its dead letter was not stored; kept in the outbox',
      );
      return 'kept' as const;
    }
    this.#o.logger.error(
      { err: errorMessage(err), entry, key, id, deadLetter: this.#letters.subject },
      'outbox entry does not validate; moved to the dead-letter stream',
    );
    return 'parked' as const;
  }
}
