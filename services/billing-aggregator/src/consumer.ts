import { allEventsSubject, type NatsNames } from '@holdfast/events';
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  ReplayPolicy,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import type { Logger } from '@holdfast/runtime';

export interface ConsumerSettings {
  durable: string;
  fetchSize: number;
  maxAckPending: number;
  ackWaitMs: number;
}

/**
 * Creates the durable pull consumer, or brings an existing one to these settings. Every
 * replica calls it at start; creating the same config twice is a no-op on the server.
 * `max_deliver: -1`: a message is never dropped for being redelivered too often (a long
 * ClickHouse outage redelivers many times); poison messages are terminated explicitly.
 */
export async function ensureConsumer(
  jsm: JetStreamManager,
  names: NatsNames,
  s: ConsumerSettings,
): Promise<void> {
  const mutable = {
    ack_wait: nanos(s.ackWaitMs),
    max_ack_pending: s.maxAckPending,
    max_deliver: -1,
  };
  try {
    await jsm.consumers.info(names.eventsStream, s.durable);
    await jsm.consumers.update(names.eventsStream, s.durable, mutable);
  } catch (err) {
    if (!(err instanceof JetStreamApiError) || err.code !== JetStreamApiCodes.ConsumerNotFound) {
      throw err;
    }
    await jsm.consumers.add(names.eventsStream, {
      ...mutable,
      durable_name: s.durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      replay_policy: ReplayPolicy.Instant,
      filter_subject: allEventsSubject(names),
    });
  }
}

export interface EventConsumerOptions {
  js: JetStreamClient;
  jsm: JetStreamManager;
  names: NatsNames;
  settings: ConsumerSettings;
  logger: Logger;
  /**
   * Handles one message. A returned promise is the backpressure: no pull while it waits.
   * `undefined` means "taken, go on" (no promise per message on the hot path).
   */
  onMessage: (msg: JsMsg) => Promise<void> | undefined;
}

/** Idle heartbeat asked of the server; two missed ones make the client re-pull. */
const IDLE_HEARTBEAT_MS = 5_000;
/** Missed heartbeats after which the loop starts a fresh consume (consumer or server gone). */
const MAX_MISSED_HEARTBEATS = 4;

/**
 * The consume loop (STYLE 9): consume(), watch its status, and when the iterator ends for any
 * reason (consumer deleted, heartbeats missed, server restart) make sure the consumer exists
 * and consume again, with backoff. `stop()` ends the loop; messages still buffered in the
 * client are naked so another replica gets them at once.
 */
export class EventConsumer {
  readonly #o: EventConsumerOptions;
  #stopping = false;
  #messages: ConsumerMessages | undefined;
  #loop: Promise<void> | undefined;
  #running = false;

  constructor(opts: EventConsumerOptions) {
    this.#o = opts;
  }

  /** True while a consume() iterator is open. */
  get running(): boolean {
    return this.#running;
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    this.#messages?.stop();
    await this.#loop;
  }

  async #run(): Promise<void> {
    const { js, jsm, names, settings, logger } = this.#o;
    let attempt = 0;
    while (!this.#stopping) {
      try {
        await ensureConsumer(jsm, names, settings);
        const consumer = await js.consumers.get(names.eventsStream, settings.durable);
        const messages = await consumer.consume({
          max_messages: settings.fetchSize,
          idle_heartbeat: IDLE_HEARTBEAT_MS,
          expires: 30_000,
        });
        this.#messages = messages;
        this.#watch(messages);
        this.#running = true;
        logger.info({ durable: settings.durable }, 'consuming');
        for await (const m of messages) {
          attempt = 0;
          if (this.#stopping) {
            m.nak();
            continue;
          }
          const wait = this.#o.onMessage(m);
          if (wait) await wait;
        }
      } catch (err) {
        logger.warn({ err }, 'consume loop failed');
      } finally {
        this.#running = false;
      }
      if (this.#stopping) break;
      const delayMs = Math.min(250 * 2 ** attempt++, 5_000);
      logger.info({ delayMs }, 'consuming again');
      await new Promise((r) => setTimeout(r, delayMs));
    }
  }

  #watch(messages: ConsumerMessages): void {
    const { logger } = this.#o;
    void (async () => {
      for await (const s of messages.status()) {
        switch (s.type) {
          case 'heartbeats_missed':
            logger.warn({ count: s.count }, 'JetStream heartbeats missed');
            if (s.count >= MAX_MISSED_HEARTBEATS) messages.stop();
            break;
          case 'consumer_deleted':
          case 'consumer_not_found':
          case 'stream_not_found':
            logger.warn({ status: s.type }, 'consumer gone: consuming again');
            messages.stop();
            break;
          case 'exceeded_limits':
          case 'no_responders':
            logger.warn({ status: s }, 'JetStream status');
            break;
          default:
            break;
        }
      }
    })();
  }
}
