import {
  deadLetterHeaders,
  deadLetterSubject,
  type DeadLetterInfo,
  type NatsNames,
} from '@holdfast/events';
import type { RetryPolicy } from '@holdfast/retry';
import type { JsMsg } from '@nats-io/jetstream';
import type { NatsConnection, Payload } from '@nats-io/transport-node';
import { errorMessage } from '../errors.js';
import type { Logger } from '../logger.js';
import { nakLater } from './messages.js';
import { JetStreamPublisher } from './publisher.js';

export interface DeadLettersOptions {
  /** The dead letters' publishes and their acks (JetStreamPublisher). */
  nc: NatsConnection;
  names: NatsNames;
  /** The service that parks messages (a header of every dead letter). */
  service: string;
  /** The last token of the dead-letter subject: the durable's name, or `outbox-relay`. */
  source: string;
  logger: Logger;
  /** Delay of the nak when a dead letter could not be stored, by delivery count. */
  redeliver?: RetryPolicy;
  /** The ack wait of the consumer whose messages are termed here (bounds a nak's resends). */
  ackWaitMs?: number;
  /** How long to wait for JetStream's ack of a dead letter. */
  timeoutMs?: number;
}

const REDELIVER: RetryPolicy = { initialMs: 1_000, maxMs: 30_000 };

/**
 * Dead letters in the one format (packages/events/src/dead-letter.ts), on
 * `<base>.deadletter.<source>`, kept by the dead-letter stream. A dead letter counts only once
 * JetStream acknowledged it; each carries a `Nats-Msg-Id`, so parking the same message twice
 * (a term lost in a crash) stores it once.
 */
export class DeadLetters {
  readonly subject: string;
  readonly #o: DeadLettersOptions;
  readonly #publisher: JetStreamPublisher;

  constructor(opts: DeadLettersOptions) {
    this.#o = opts;
    this.subject = deadLetterSubject(opts.names, opts.source);
    this.#publisher = new JetStreamPublisher(opts.nc);
  }

  /** Stores a dead letter; resolves once JetStream has it, rejects when it does not. */
  publish(data: Payload, info: Omit<DeadLetterInfo, 'service'>, msgId: string): Promise<void> {
    const h = deadLetterHeaders({ ...info, service: this.#o.service });
    return this.#publisher.publish(
      [{ subject: this.subject, data, msgId, headers: h }],
      this.#o.timeoutMs ?? 5_000,
    );
  }

  /**
   * Terminates a JetStream message with a dead letter: the dead letter first, acknowledged,
   * then `term()`. When the dead letter cannot be stored the message is nak'ed instead, so it
   * comes back later; it is never terminated without its dead letter. True when parked.
   */
  async term(msg: JsMsg, reason: string): Promise<boolean> {
    const { stream, deliveryCount, timestampNanos } = msg.info;
    const context = { subject: msg.subject, stream, streamSeq: msg.seq, deliveryCount };
    try {
      await this.publish(
        msg.data,
        { reason, ...context },
        `${this.#o.source}.${stream}.${msg.seq}.${timestampNanos}`,
      );
    } catch (err) {
      const delayMs = nakLater(msg, this.#o.redeliver ?? REDELIVER, this.#o.ackWaitMs);
      this.#o.logger.error(
        { ...context, reason, err: errorMessage(err), delayMs },
        'dead letter not stored: message handed back for redelivery',
      );
      return false;
    }
    this.#o.logger.error(
      { ...context, reason, deadLetter: this.subject },
      'poison message dead-lettered',
    );
    // No reason argument: nats-server 2.9 does not parse `+TERM <reason>` and would leave it pending.
    msg.term();
    return true;
  }
}
