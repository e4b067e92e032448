import { eventSubject, HoldfastEvent, type NatsNames } from '@holdfast/events';
import { JETSTREAM_OP_TIMEOUT_MS } from '@holdfast/runtime';
import type { JetStreamClient } from '@nats-io/jetstream';
import { z } from 'zod';

/** The event types the alerter itself emits. */
const ALERTER_TYPES = new Set(['threshold.crossed', 'budget.exhaustion_projected']);

/**
 * Publishes the alerter's own events to the events stream, validated with their schema, with
 * `Nats-Msg-Id` = event id so a republished event is dropped by the stream.
 */
export class EventPublisher {
  readonly #js: JetStreamClient;
  readonly #names: NatsNames;

  constructor(opts: { js: JetStreamClient; names: NatsNames }) {
    this.#js = opts.js;
    this.#names = opts.names;
  }

  /** Publishes `raw` and returns it as parsed. */
  async publish(raw: Record<string, unknown>): Promise<HoldfastEvent> {
    const parsed = HoldfastEvent.safeParse(raw);
    if (!parsed.success) throw new Error(`invalid alerter event: ${z.prettifyError(parsed.error)}`);
    const event = parsed.data;
    if (!ALERTER_TYPES.has(event.type)) throw new Error(`the alerter does not emit ${event.type}`);
    await this.#js.publish(
      eventSubject(this.#names, event.tenant, event.type),
      JSON.stringify(event),
      { msgID: event.id, timeout: JETSTREAM_OP_TIMEOUT_MS },
    );
    return event;
  }
}
