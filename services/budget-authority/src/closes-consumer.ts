import { closesStream, DeferredClose, type NatsNames } from '@holdfast/events';
import type { RetryPolicy } from '@holdfast/retry';
import {
  DeadLetters,
  DurableConsumer,
  ensureClosesStream,
  nakLater,
  type Logger,
} from '@holdfast/runtime';
import type { JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import type { HandlerContext } from './context.js';
import { release, settle } from './handlers/close.js';

const DURABLE = 'authority-closes';
/** A close Redis cannot take yet comes back after this (longer each time, up to 30 s). */
const REDELIVER: RetryPolicy = { initialMs: 1_000, maxMs: 30_000 };
const RESTART: RetryPolicy = { initialMs: 250, maxMs: 5_000 };

/**
 * Applies the settles and releases edges left in the closes stream while the authority (or
 * its Redis) could not take them: the real usage of calls that finished during an outage is
 * billed once the authority is back, instead of being lost to lease expiry. Every replica
 * consumes from one durable of the work queue, so each close is applied once (close.lua is
 * idempotent anyway). A close that no authority can ever apply is dead-lettered.
 */
export class ClosesConsumer {
  readonly #loop: DurableConsumer;
  readonly #letters: DeadLetters;

  constructor(
    private readonly ctx: HandlerContext,
    js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly names: NatsNames,
    private readonly logger: Logger,
    private readonly replicas?: number,
  ) {
    this.#letters = new DeadLetters({
      js,
      names,
      service: 'budget-authority',
      source: DURABLE,
      logger,
    });
    this.#loop = new DurableConsumer({
      js,
      jsm,
      stream: closesStream(names).name,
      durable: { durable_name: DURABLE, ack_wait: nanos(30_000) },
      pullSize: 64,
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
  }

  stop(): Promise<void> {
    return this.#loop.stop();
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
      nakLater(m, REDELIVER);
    } else {
      await this.#letters.term(m, `${r.error.code}: ${r.error.message}`);
    }
  }
}
