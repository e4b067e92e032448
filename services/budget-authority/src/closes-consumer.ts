import { closesStream, DeferredClose, type NatsNames } from '@holdfast/events';
import type { RetryPolicy } from '@holdfast/retry';
import {
  DeadLetters,
  DurableConsumer,
  ensureClosesStream,
  every,
  nakLater,
  purgeAcked,
  purgeForgetsPending,
  type Logger,
  type Periodic,
} from '@holdfast/runtime';
import {
  jetstream,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import { nanos, type NatsConnection } from '@nats-io/transport-node';
import type { HandlerContext } from './context.js';
import { release, settle } from './handlers/close.js';

export const CLOSES_DURABLE = 'authority-closes';
/** A close Redis cannot take yet comes back after this (longer each time, up to 30 s). */
const REDELIVER: RetryPolicy = { initialMs: 1_000, maxMs: 30_000 };
const RESTART: RetryPolicy = { initialMs: 250, maxMs: 5_000 };
/**
 * Closes are pulled in bursts, one pull out at a time, this often while there are none (a pull
 * that came back full is followed at once). Not consume(): its pulls die with a killed consumer
 * leader, and it pulls again only after two missed heartbeats (10-15 s) while the new leader
 * holds what it sent meanwhile for the ack wait; a burst pull unanswered a second after it was
 * due is sent again (closes.nats-kill.int.test.ts).
 */
export const PULL_EVERY_MS = 250;
/**
 * How long a close handed over stays with its replica without a word (`working()` every third
 * of it while it runs, then the ack). A delivery lost with a killed consumer leader comes back
 * after it, so it bounds how late that close is applied; applying a close takes milliseconds
 * (one script, bounded by the Redis timeout), and one applied twice changes nothing.
 */
export const ACK_WAIT_MS = 10_000;

/**
 * Applies the settles and releases edges left in the closes stream while the authority (or
 * its Redis) could not take them: the real usage of calls that finished during an outage is
 * billed once the authority is back, instead of being lost to lease expiry. Every replica
 * consumes from one durable of the work queue, so each close is applied once (close.lua is
 * idempotent anyway). A close that no authority can ever apply is dead-lettered.
 *
 * An ack deletes the close; on nats-server 2.9.10 a delete can die with a killed stream leader
 * while the consumer's state has the ack, so the stream keeps closes below the consumer's ack
 * floor, never delivered again (closes.nats-kill.int.test.ts: 100-146 of 3,000 in CI). Every
 * `purgeEveryMs` each replica purges the stream up to that floor when it holds any (`purgeAcked`;
 * on a server before 2.9.15 only while no close is delivered and unacked: a purge there would
 * forget those, and one delivered during the purge is published again, purge-acked.ts). The stream stays a work queue: no reset seen in 47 rounds of kills, and both
 * the edge and the authority publish to it, so a new stream would need both moved in step.
 */
export class ClosesConsumer {
  readonly #loop: DurableConsumer;
  readonly #letters: DeadLetters;
  readonly #forgetsPending: boolean;
  readonly #js: JetStreamClient;
  #purger: Periodic | undefined;

  constructor(
    private readonly ctx: HandlerContext,
    nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly names: NatsNames,
    private readonly logger: Logger,
    private readonly replicas?: number,
    /** AUTHORITY_CLOSES_PURGE_EVERY_MS: how often `purgeAcked` runs (two info requests). */
    private readonly purgeEveryMs = 60_000,
  ) {
    const js = (this.#js = jetstream(nc));
    this.#forgetsPending = purgeForgetsPending(nc.info?.version);
    this.#letters = new DeadLetters({
      nc,
      names,
      service: 'budget-authority',
      source: CLOSES_DURABLE,
      logger,
      ackWaitMs: ACK_WAIT_MS,
    });
    this.#loop = new DurableConsumer({
      nc,
      js,
      jsm,
      stream: closesStream(names).name,
      durable: { durable_name: CLOSES_DURABLE, ack_wait: nanos(ACK_WAIT_MS) },
      pullSize: 64,
      bursts: { everyMs: PULL_EVERY_MS },
      concurrency: 8,
      onMessage: (m) => this.#apply(m),
      restart: RESTART,
      redeliver: REDELIVER,
      maxMissedHeartbeats: 4,
      logger,
    });
  }

  async start(): Promise<void> {
    await ensureClosesStream(this.jsm, this.names, {
      replicas: this.replicas,
      logger: this.logger,
    });
    await this.#loop.start();
    this.#purger = every(this.purgeEveryMs, () => this.#purgeAcked(), {
      logger: this.logger,
      failed: 'closes not purged',
    });
  }

  async stop(): Promise<void> {
    await this.#purger?.stop();
    await this.#loop.stop();
  }

  /** Purges the closes stored below the consumer's ack floor; returns how many. */
  async #purgeAcked(): Promise<number> {
    const stream = closesStream(this.names).name;
    const { state } = await this.jsm.streams.info(stream);
    const c = await this.jsm.consumers.info(stream, CLOSES_DURABLE);
    if (state.messages === 0 || state.first_seq > c.ack_floor.stream_seq) return 0;
    const r = await purgeAcked(this.jsm, this.#js, c, { forgetsPending: this.#forgetsPending });
    if (r.kind === 'skipped') return 0;
    this.ctx.metrics.closesPurged.inc(r.purged);
    this.logger.warn(
      { purged: r.purged, ackFloor: r.floor, raced: r.raced, requeued: r.requeued },
      'acked closes the stream kept purged',
    );
    return r.purged;
  }

  async #apply(m: JsMsg): Promise<void> {
    let parsed;
    try {
      parsed = DeferredClose.safeParse(m.json());
    } catch {
      parsed = undefined;
    }
    if (!parsed?.success) {
      await this.#letters.term(m, 'not a deferred close');
      return;
    }
    const c = parsed.data;
    const r =
      c.op === 'settle' ? await settle(this.ctx, c.request) : await release(this.ctx, c.request);
    if (r.ok) {
      this.logger.info(
        { reservationId: c.request.reservationId, op: c.op, status: r.value.status },
        'deferred close applied',
      );
      m.ack();
    } else if (r.error.code === 'budget_store_unavailable') {
      nakLater(m, REDELIVER, ACK_WAIT_MS);
    } else {
      await this.#letters.term(m, `${r.error.code}: ${r.error.message}`);
    }
  }
}
