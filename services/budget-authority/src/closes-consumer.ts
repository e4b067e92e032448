import { setTimeout as sleep } from 'node:timers/promises';
import { closesStream, DeferredClose, type NatsNames } from '@holdfast/events';
import { ensureClosesStream, errorMessage, type Logger } from '@holdfast/runtime';
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import type { HandlerContext } from './context.js';
import { release, settle } from './handlers/close.js';

const DURABLE = 'authority-closes';
/** Closes applied per pull; each is one close.lua call. */
const BATCH = 64;

/**
 * Applies the settles and releases edges left in the closes stream while this authority (or
 * its Redis) could not take them: the real usage of calls that finished during an outage is
 * billed once the authority is back, instead of being lost to lease expiry. Every replica
 * pulls from one durable consumer of the work queue, so each close is applied once (and
 * close.lua is idempotent anyway). A close Redis cannot take yet is redelivered later.
 */
export class ClosesConsumer {
  #running = false;
  #loop: Promise<void> | undefined;

  constructor(
    private readonly ctx: HandlerContext,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly names: NatsNames,
    private readonly logger: Logger,
  ) {}

  async start(): Promise<void> {
    await ensureClosesStream(this.jsm, this.names);
    await this.#ensureDurable();
    this.#running = true;
    this.#loop = this.#run();
  }

  async stop(): Promise<void> {
    this.#running = false;
    await this.#loop;
  }

  async #ensureDurable(): Promise<void> {
    const stream = closesStream(this.names).name;
    try {
      await this.jsm.consumers.info(stream, DURABLE);
    } catch (err) {
      if (!(err instanceof JetStreamApiError) || err.code !== JetStreamApiCodes.ConsumerNotFound) {
        throw err;
      }
      await this.jsm.consumers.add(stream, {
        durable_name: DURABLE,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        ack_wait: 30_000_000_000,
        max_deliver: -1,
      });
    }
  }

  async #run(): Promise<void> {
    const stream = closesStream(this.names).name;
    while (this.#running) {
      try {
        const consumer = await this.js.consumers.get(stream, DURABLE);
        const batch = await consumer.fetch({ max_messages: BATCH, expires: 1_000 });
        for await (const m of batch) await this.#apply(m);
      } catch (err) {
        this.logger.warn({ err: errorMessage(err) }, 'closes stream pull failed; retrying');
        if (this.#running) await sleep(1_000);
        if (this.#running) await this.#ensureDurable().catch(() => undefined);
      }
    }
  }

  async #apply(m: JsMsg): Promise<void> {
    let parsed;
    try {
      parsed = DeferredClose.safeParse(m.json());
    } catch {
      parsed = undefined;
    }
    if (!parsed?.success) {
      // Not a close any edge writes: nothing can apply it.
      this.logger.error({ seq: m.seq }, 'unreadable deferred close dropped');
      m.term();
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
      m.nak(1_000);
    } else {
      this.logger.error(
        { reservationId: c.request.reservationId, code: r.error.code },
        'deferred close refused',
      );
      m.term();
    }
  }
}
