import {
  createInbox,
  headers,
  type Msg,
  type NatsConnection,
  type Subscription,
} from '@nats-io/transport-node';

/** One event to store: its subject, its JSON, its id (`Nats-Msg-Id`, JetStream's dedupe key). */
export interface Publish {
  subject: string;
  data: string;
  msgId: string;
}

/** A round of publishes waiting for its acks. */
interface Round {
  /** Reply subjects of this round start with it; an ack of an earlier round does not. */
  prefix: string;
  /** Which publishes JetStream acked (by their index in the round). */
  acked: Uint8Array;
  left: number;
  timer: NodeJS.Timeout;
  resolve: () => void;
  reject: (err: Error) => void;
}

const decoder = new TextDecoder();

/**
 * Publishes the relay's events to JetStream and waits for every ack, as `js.publish` does one
 * by one, at a round's cost instead of each event's (issue 14): `js.publish` made each event a
 * request of its own (a request object, a timer, a header set copied, three promises, a
 * TextDecoder and the ack's error classes). Here the events of a round go out pipelined in
 * order, each with its `Nats-Msg-Id` and a reply subject of the round on one inbox
 * subscription; the round resolves when JetStream acked each of them (a duplicate's ack too)
 * and fails on the first error, a no-responders status (no stream, or its leader being
 * elected) or after `timeoutMs` with no ack for some. One round at a time; acks of a round that
 * failed are ignored when they come later.
 */
export class RelayPublisher {
  readonly #nc: NatsConnection;
  readonly #inbox = createInbox();
  #sub: Subscription | undefined;
  #round: Round | undefined;
  #rounds = 0;

  constructor(nc: NatsConnection) {
    this.#nc = nc;
  }

  /** Resolves once JetStream stored (or had already stored) every event, in their order. */
  publish(events: readonly Publish[], timeoutMs: number): Promise<void> {
    if (events.length === 0) return Promise.resolve();
    if (this.#round) return Promise.reject(new Error('relay publisher: a round is in flight'));
    this.#sub ??= this.#nc.subscribe(`${this.#inbox}.>`, {
      callback: (err, msg) => {
        if (!err) this.#ack(msg);
      },
    });
    const prefix = `${this.#inbox}.${++this.#rounds}.`;
    return new Promise<void>((resolve, reject) => {
      const round: Round = {
        prefix,
        acked: new Uint8Array(events.length),
        left: events.length,
        timer: setTimeout(
          () =>
            this.#end(
              round,
              new Error(`JetStream did not ack ${round.left} of ${events.length} events in time`),
            ),
          timeoutMs,
        ),
        resolve,
        reject,
      };
      this.#round = round;
      try {
        for (let i = 0; i < events.length; i++) {
          const { subject, data, msgId } = events[i]!;
          const h = headers();
          h.set('Nats-Msg-Id', msgId);
          this.#nc.publish(subject, data, { reply: prefix + i, headers: h });
        }
      } catch (err) {
        // The connection is closed or draining, or an event is too large: nothing is acked.
        this.#end(round, err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  /** Stops listening for acks (a round in flight fails). */
  close(): void {
    if (this.#round) this.#end(this.#round, new Error('relay publisher closed'));
    this.#sub?.unsubscribe();
    this.#sub = undefined;
  }

  #ack(msg: Msg): void {
    const round = this.#round;
    if (!round || !msg.subject.startsWith(round.prefix)) return;
    const i = Number(msg.subject.slice(round.prefix.length));
    if (!(i >= 0 && i < round.acked.length) || round.acked[i]) return;
    // A status without a body: no responders (503), the stream not there or electing a leader.
    if (msg.data.length === 0) {
      this.#end(round, new Error(`JetStream did not take the event: status ${msg.headers?.code}`));
      return;
    }
    let ack: { stream?: unknown; error?: { code?: number; description?: string } };
    try {
      ack = JSON.parse(decoder.decode(msg.data)) as typeof ack;
    } catch {
      this.#end(round, new Error('JetStream sent an ack that is not JSON'));
      return;
    }
    if (ack.error || typeof ack.stream !== 'string' || ack.stream === '') {
      const why = ack.error ? `${ack.error.code}: ${ack.error.description}` : 'no stream';
      this.#end(round, new Error(`JetStream refused the event (${why})`));
      return;
    }
    round.acked[i] = 1;
    if (--round.left === 0) this.#end(round);
  }

  #end(round: Round, err?: Error): void {
    if (this.#round !== round) return;
    this.#round = undefined;
    clearTimeout(round.timer);
    if (err) round.reject(err);
    else round.resolve();
  }
}
