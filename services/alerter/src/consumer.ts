import { allEventsSubject, parseEvent, type HoldfastEvent, type NatsNames } from '@holdfast/events';
import type { RetryPolicy } from '@holdfast/retry';
import {
  DeadLetters,
  DurableConsumer,
  errorMessage,
  nakLater,
  streamSequence,
  type Logger,
} from '@holdfast/runtime';
import {
  DeliverPolicy,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import { nanos, type NatsConnection } from '@nats-io/transport-node';
import type { Counter } from 'prom-client';
import type { AlerterSettings } from './env.js';
import { KeyedSerial } from './keyed-serial.js';
import type { AlerterMetrics } from './metrics.js';

/**
 * Handles one event; throwing or rejecting means "try again later" (the message is nak'd).
 * No promise: handled already, nothing to wait for.
 */
type EventHandler = (event: HoldfastEvent, seq: number) => Promise<void> | undefined;
/** Work of an event that needs no order (its webhook jobs): as the handler, without `seq`. */
type UnorderedWork = (event: HoldfastEvent) => Promise<void> | undefined;

/**
 * A failed event comes back half a second later, then every second: alerts are due within 5 s
 * of a crossing, and a stream or bucket electing a leader (4-9 s on NATS 2.9) fails every
 * attempt at once until it has one.
 */
const RETRY: RetryPolicy = { initialMs: 500, maxMs: 1_000 };
const noop = () => undefined;

/** How long an event handed over stays with its replica without a word (`working()`, ack, nak). */
const ACK_WAIT_MS = 30_000;
/** The alerter's readers start a lost consume again 1 s later, every time. */
export const RESTART: RetryPolicy = { initialMs: 1_000, maxMs: 1_000, factor: 1 };

export interface EventConsumerOptions {
  /** The connection `js` and `jsm` were made from: burst pulls go on it, and stop() flushes it. */
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  names: NatsNames;
  settings: AlerterSettings;
  logger: Logger;
  metrics: AlerterMetrics;
  handler: EventHandler;
  /**
   * Started as the event is taken, beside the org's earlier events still at their handler (a
   * busy org's events each wait for a JetStream publish: one at a time, a backlog drained at
   * one round trip an event); the event is acked once both are done.
   */
  unordered?: UnorderedWork;
}

/**
 * The alerter's durable consumer on the events stream, shared by every replica (each message
 * goes to one of them), on the shared loop (packages/runtime): in bursts (a pull of what is
 * stored every `pullEveryMs`) or, with 0, each event as it is stored. Events of one org are
 * handled in order within a replica (their webhook jobs, `unordered`, are queued side by
 * side); across replicas in any order: a crossing is a property of one event (thresholds.ts)
 * and the window state is changed by compare-and-set only. Acks come after the handler's side
 * effects (webhook jobs queued, state written, events published). Only new events: a new
 * alerter does not alert on history.
 */
export class EventConsumer {
  readonly #o: EventConsumerOptions;
  readonly #logger: Logger;
  readonly #serial = new KeyedSerial();
  readonly #letters: DeadLetters;
  readonly #loop: DurableConsumer;
  /** The `result="ok"` series by event type (the counter's label lookup, once per type). */
  readonly #ok = new Map<string, Counter.Internal>();

  constructor(opts: EventConsumerOptions) {
    this.#o = opts;
    this.#logger = opts.logger.child({ component: 'events' });
    const { js, jsm, names, settings } = opts;
    this.#letters = new DeadLetters({
      nc: opts.nc,
      names,
      service: 'alerter',
      source: settings.consumer,
      logger: this.#logger,
      redeliver: RETRY,
      ackWaitMs: ACK_WAIT_MS,
    });
    this.#loop = new DurableConsumer({
      nc: opts.nc,
      js,
      jsm,
      stream: names.eventsStream,
      durable: {
        durable_name: settings.consumer,
        deliver_policy: DeliverPolicy.New,
        filter_subject: allEventsSubject(names),
        ack_wait: nanos(ACK_WAIT_MS),
        max_ack_pending: 10_000,
      },
      pullSize: settings.eventConcurrency,
      ...(settings.pullEveryMs > 0 ? { bursts: { everyMs: settings.pullEveryMs } } : {}),
      concurrency: settings.eventConcurrency,
      onMessage: (m) => this.#handle(m),
      restart: RESTART,
      redeliver: RETRY,
      maxMissedHeartbeats: 3,
      logger: this.#logger,
    });
  }

  get consuming(): boolean {
    return this.#loop.consuming;
  }

  start(): Promise<void> {
    return this.#loop.start();
  }

  stop(): Promise<void> {
    return this.#loop.stop();
  }

  #handled(type: HoldfastEvent['type']): Counter.Internal {
    let series = this.#ok.get(type);
    if (!series) {
      series = this.#o.metrics.events.labels({ type, result: 'ok' });
      this.#ok.set(type, series);
    }
    return series;
  }

  /**
   * Parses, hands the event to the handler after the org's earlier events, and acks it after
   * the handler's side effects; no promise when the handler needed none (most events).
   */
  #handle(m: JsMsg): Promise<void> | undefined {
    const parsed = parseEvent(m.data);
    if (!parsed.ok) return this.#poison(m, parsed.error.message);
    const event = parsed.value;
    // From the ack subject, as the aggregator reads it: nats.js's `seq` parses all of its info.
    const seq = streamSequence(m);
    let unordered: Promise<void> | undefined;
    let ordered: Promise<void> | undefined;
    try {
      unordered = this.#o.unordered?.(event);
      ordered = this.#serial.run(event.org, () => this.#o.handler(event, seq));
    } catch (err) {
      unordered?.catch(noop); // retried as a whole: its outcome is not waited for
      this.#retry(m, event, err);
      return undefined;
    }
    const work =
      unordered && ordered ? Promise.all([unordered, ordered]).then(noop) : (unordered ?? ordered);
    if (!work) {
      this.#handled(event.type).inc();
      m.ack();
      return undefined;
    }
    return work.then(
      () => {
        this.#handled(event.type).inc();
        m.ack();
      },
      (err: unknown) => this.#retry(m, event, err),
    );
  }

  /** A poison message: parked where an operator looks (docs/events.md), never retried. */
  async #poison(m: JsMsg, reason: string): Promise<void> {
    const parked = await this.#letters.term(m, reason);
    this.#o.metrics.events.inc({ type: 'unknown', result: parked ? 'poison' : 'retry' });
  }

  #retry(m: JsMsg, event: HoldfastEvent, err: unknown): void {
    this.#logger.warn(
      { err: errorMessage(err), seq: m.seq, type: event.type, id: event.id },
      'event handling failed; will retry',
    );
    this.#o.metrics.events.inc({ type: event.type, result: 'retry' });
    nakLater(m, RETRY, ACK_WAIT_MS);
  }
}
