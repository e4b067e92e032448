import {
  allEventsSubject,
  deadLetterSubject,
  parseEvent,
  type HoldfastEvent,
  type NatsNames,
} from '@holdfast/events';
import { errorMessage, type Logger } from '@holdfast/runtime';
import type { JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import { headers, nanos, type NatsConnection } from '@nats-io/transport-node';
import type { AlerterSettings } from './config.js';
import { KeyedSerial } from './keyed-serial.js';
import type { AlerterMetrics } from './metrics.js';
import { PullLoop } from './pull-loop.js';

/** Handles one event; throwing means "try again later" (the message is nak'd). */
type EventHandler = (event: HoldfastEvent, seq: number) => Promise<void>;

/** A failed event is redelivered after this long. */
const RETRY_DELAY_MS = 2_000;

export interface EventConsumerOptions {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  names: NatsNames;
  settings: AlerterSettings;
  logger: Logger;
  metrics: AlerterMetrics;
  handler: EventHandler;
}

/**
 * The alerter's durable consumer on the events stream, shared by every replica (each message
 * goes to one of them). Events of one org are handled in order within a replica; across
 * replicas the window state is protected by compare-and-set (see thresholds.ts). Acks come
 * after the handler's side effects (webhook jobs queued, state written, events published).
 */
export class EventConsumer {
  readonly #o: EventConsumerOptions;
  readonly #logger: Logger;
  readonly #serial = new KeyedSerial();
  #loop: PullLoop | undefined;

  constructor(opts: EventConsumerOptions) {
    this.#o = opts;
    this.#logger = opts.logger.child({ component: 'events' });
  }

  get consuming(): boolean {
    return this.#loop?.consuming ?? false;
  }

  async start(): Promise<void> {
    this.#loop = new PullLoop({
      js: this.#o.js,
      jsm: this.#o.jsm,
      stream: this.#o.names.eventsStream,
      durable: {
        durable_name: this.#o.settings.consumer,
        filter_subject: allEventsSubject(this.#o.names),
        ack_wait: nanos(30_000),
        max_ack_pending: 10_000,
      },
      concurrency: this.#o.settings.eventConcurrency,
      logger: this.#logger,
      handle: (m) => this.#handle(m),
    });
    await this.#loop.start();
  }

  async stop(): Promise<void> {
    await this.#loop?.stop();
  }

  async #handle(m: JsMsg): Promise<void> {
    const parsed = parseEvent(m.data);
    if (!parsed.ok) {
      // A poison message: park it where an operator can see it, never retry it.
      const h = headers();
      h.set('Holdfast-Error', parsed.error.replace(/[\r\n]+/g, ' ').slice(0, 1_000));
      h.set('Holdfast-Stream-Seq', String(m.seq));
      this.#o.nc.publish(deadLetterSubject(this.#o.names, this.#o.settings.consumer), m.data, {
        headers: h,
      });
      this.#logger.error({ seq: m.seq, subject: m.subject, error: parsed.error }, 'poison event');
      this.#o.metrics.events.inc({ type: 'unknown', result: 'poison' });
      m.term();
      return;
    }
    const event = parsed.event;
    try {
      await this.#serial.run(event.org, () => this.#o.handler(event, m.seq));
      this.#o.metrics.events.inc({ type: event.type, result: 'ok' });
      m.ack();
    } catch (err) {
      this.#logger.warn(
        { err: errorMessage(err), seq: m.seq, type: event.type, id: event.id },
        'event handling failed; will retry',
      );
      this.#o.metrics.events.inc({ type: event.type, result: 'retry' });
      m.nak(RETRY_DELAY_MS);
    }
  }
}
