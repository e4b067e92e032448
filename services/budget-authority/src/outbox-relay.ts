import { eventSubject, type NatsNames } from '@holdfast/events';
import type { JetStreamClient } from '@nats-io/jetstream';
import type { Redis } from 'ioredis';
import type { Logger } from '@holdfast/runtime';
import type { ConfigStore } from './config-store.js';
import type { Keys } from './keys.js';
import type { AuthorityMetrics } from './metrics.js';
import { decodeOutboxEntry } from './outbox.js';

/** Takes or renews the relay lease of an org. KEYS[1] lock, ARGV[1] replica id, ARGV[2] ms. */
const CLAIM = `
local owner = redis.call('GET', KEYS[1])
if owner == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if owner then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`;

export interface RelayOptions {
  redis: Redis;
  js: JetStreamClient;
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
 * them once JetStream acknowledged them. One replica relays an org at a time (a lease in
 * Redis). A crash between publish and delete republishes on restart; JetStream's duplicate
 * window drops the copy, so nothing is lost and nothing is doubled.
 */
export class OutboxRelay {
  readonly #o: RelayOptions;
  readonly #blocking: Redis;
  readonly #leaseMs: number;
  readonly #batch: number;
  readonly #pauseMs: number;
  #owned: string[] = [];
  #claimedAt = 0;
  #running = false;
  #loop: Promise<void> | undefined;

  constructor(opts: RelayOptions) {
    this.#o = opts;
    this.#leaseMs = opts.leaseMs ?? 5_000;
    this.#batch = opts.batch ?? 1_000;
    this.#pauseMs = opts.pauseMs ?? 5;
    // XREAD BLOCK holds its connection; give it its own.
    this.#blocking = opts.redis.duplicate({ enableOfflineQueue: true });
    this.#blocking.on('error', (err: Error) =>
      opts.logger.debug({ err: err.message }, 'relay connection error'),
    );
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
    this.#blocking.disconnect();
    await this.#loop;
    // Hand the leases over at once instead of making the others wait for them to lapse.
    await Promise.all(
      this.#owned.map((org) =>
        this.#o.redis
          .eval(
            `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`,
            1,
            this.#o.keys.relayLock(org),
            this.#o.replicaId,
          )
          .catch(() => 0),
      ),
    );
  }

  async #claim(): Promise<void> {
    const orgs = await this.#o.config.orgs();
    const results = await Promise.all(
      orgs.map((org) =>
        this.#o.redis.eval(
          CLAIM,
          1,
          this.#o.keys.relayLock(org),
          this.#o.replicaId,
          String(this.#leaseMs),
        ),
      ),
    );
    this.#owned = orgs.filter((_, i) => results[i] === 1);
    this.#claimedAt = Date.now();
  }

  async #run(): Promise<void> {
    let backoff = 50;
    while (this.#running) {
      try {
        if (Date.now() - this.#claimedAt > this.#leaseMs / 3) await this.#claim();
        if (this.#owned.length === 0) {
          await sleep(this.#leaseMs / 3);
          continue;
        }
        const relayed = await this.#relayOnce(200);
        backoff = 50;
        // Under a trickle of events, wait a moment so the next round carries a batch: one
        // XREAD, one pipelined publish and one XDEL for many events instead of one each.
        if (relayed > 0 && relayed < this.#batch) await sleep(this.#pauseMs);
      } catch (err) {
        if (!this.#running) break;
        this.#o.metrics.relayErrors.inc();
        this.#o.logger.warn({ err }, 'outbox relay round failed; retrying');
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 2_000);
      }
    }
  }

  /** Reads whatever the owned outboxes hold (waiting up to `blockMs`), relays it, says how much. */
  async #relayOnce(blockMs: number): Promise<number> {
    const keys = this.#owned.map((org) => this.#o.keys.outbox(org));
    const reply = await this.#blocking.xread(
      'COUNT',
      this.#batch,
      'BLOCK',
      blockMs,
      'STREAMS',
      ...keys,
      ...keys.map(() => '0'),
    );
    if (!reply) return 0;
    let relayed = 0;
    for (const [key, entries] of reply) {
      await this.#publish(key, entries);
      relayed += entries.length;
    }
    return relayed;
  }

  async #publish(key: string, entries: [string, string[]][]): Promise<void> {
    const { js, names, logger, config } = this.#o;
    const acks = entries.map(async ([, fields]) => {
      let event;
      try {
        event = decodeOutboxEntry(fields, config.current);
      } catch (err) {
        // A bug, never input. Park the raw entry in the org's dead-letter stream (durable,
        // inspectable, replayable once fixed) and keep the rest of the outbox moving.
        logger.error(
          { err, fields },
          'outbox entry does not validate; moved to the dead-letter stream',
        );
        this.#o.metrics.relayErrors.inc();
        await this.#o.redis.xadd(`${key}:dead`, '*', 'error', String(err), ...fields);
        return;
      }
      await js.publish(eventSubject(names, event.tenant, event.type), JSON.stringify(event), {
        msgID: event.id,
      });
    });
    // Publishes are pipelined on one connection, so JetStream stores them in outbox order.
    await Promise.all(acks);
    await this.#o.redis.xdel(key, ...entries.map(([id]) => id));
    this.#o.metrics.published.inc(entries.length);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
