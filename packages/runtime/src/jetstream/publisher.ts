import {
  createInbox,
  headers,
  type Msg,
  type NatsConnection,
  type Payload,
  type Subscription,
} from '@nats-io/transport-node';

/** One message to store: its subject, its data, its id (`Nats-Msg-Id`, JetStream's dedupe key). */
export interface Publish {
  subject: string;
  data: Payload;
  msgId: string;
  /** More headers to send with it (a dead letter's). */
  headers?: Iterable<readonly [string, string]>;
}

/** A round of publishes waiting for its acks. */
interface Round {
  /** Which publishes JetStream acked (by their index in the round). */
  acked: Uint8Array;
  left: number;
  timer: NodeJS.Timeout;
  resolve: () => void;
  reject: (err: Error) => void;
}

const decoder = new TextDecoder();

/**
 * Publishes to JetStream and waits for every ack, as `js.publish` does one by one, at a
 * round's cost instead of each message's (issue 14): `js.publish` made each a request of its
 * own (a request object, a timer, a header set copied, three promises, a TextDecoder and the
 * ack's error classes). Here the messages of a round go out pipelined in order, each with its
 * `Nats-Msg-Id` and a reply subject of the round (`<inbox>.<round>.<index>`) on one inbox
 * subscription; the round resolves when JetStream acked each of them (a duplicate's ack too)
 * and fails on the first error, a no-responders status (no stream, or its leader being
 * elected) or after `timeoutMs` with no ack for some. Rounds may be in flight at once (dead
 * letters of concurrent messages); each is answered by its own acks only, and acks of a round
 * that ended are ignored when they come later. The outbox relay's events, the floor's and the
 * dead letters all go through it.
 */
export class JetStreamPublisher {
  readonly #nc: NatsConnection;
  readonly #prefix = `${createInbox()}.`;
  #sub: Subscription | undefined;
  readonly #rounds = new Map<number, Round>();
  #lastRound = 0;

  constructor(nc: NatsConnection) {
    this.#nc = nc;
  }

  /** Resolves once JetStream stored (or had already stored) every message, in their order. */
  publish(messages: readonly Publish[], timeoutMs: number): Promise<void> {
    if (messages.length === 0) return Promise.resolve();
    this.#sub ??= this.#nc.subscribe(`${this.#prefix}>`, {
      callback: (err, msg) => {
        if (!err) this.#ack(msg);
      },
    });
    const id = ++this.#lastRound;
    const replyPrefix = `${this.#prefix}${id}.`;
    return new Promise<void>((resolve, reject) => {
      const round: Round = {
        acked: new Uint8Array(messages.length),
        left: messages.length,
        timer: setTimeout(
          () =>
            this.#end(
              id,
              new Error(`JetStream did not ack ${round.left} of ${messages.length} in time`),
            ),
          timeoutMs,
        ),
        resolve,
        reject,
      };
      this.#rounds.set(id, round);
      try {
        for (let i = 0; i < messages.length; i++) {
          const m = messages[i]!;
          const h = headers();
          h.set('Nats-Msg-Id', m.msgId);
          if (m.headers) for (const [name, value] of m.headers) h.set(name, value);
          this.#nc.publish(m.subject, m.data, { reply: replyPrefix + i, headers: h });
        }
      } catch (err) {
        // The connection is closed or draining, or a message is too large: nothing is acked.
        this.#end(id, err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  /** Stops listening for acks (the rounds in flight fail). */
  close(): void {
    for (const id of [...this.#rounds.keys()]) this.#end(id, new Error('publisher closed'));
    this.#sub?.unsubscribe();
    this.#sub = undefined;
  }

  #ack(msg: Msg): void {
    // `<round>.<index>` after the inbox's prefix.
    const { subject } = msg;
    const dot = subject.indexOf('.', this.#prefix.length);
    if (dot < 0) return;
    const id = Number(subject.slice(this.#prefix.length, dot));
    const round = this.#rounds.get(id);
    if (!round) return;
    const i = Number(subject.slice(dot + 1));
    if (!(i >= 0 && i < round.acked.length) || round.acked[i]) return;
    // A status without a body: no responders (503), the stream not there or electing a leader.
    if (msg.data.length === 0) {
      this.#end(id, new Error(`JetStream did not take the message: status ${msg.headers?.code}`));
      return;
    }
    let ack: { stream?: unknown; error?: { code?: number; description?: string } };
    try {
      ack = JSON.parse(decoder.decode(msg.data)) as typeof ack;
    } catch {
      this.#end(id, new Error('JetStream sent an ack that is not JSON'));
      return;
    }
    if (ack.error || typeof ack.stream !== 'string' || ack.stream === '') {
      const why = ack.error ? `${ack.error.code}: ${ack.error.description}` : 'no stream';
      this.#end(id, new Error(`JetStream refused the message (${why})`));
      return;
    }
    round.acked[i] = 1;
    if (--round.left === 0) this.#end(id);
  }

  #end(id: number, err?: Error): void {
    const round = this.#rounds.get(id);
    if (!round) return;
    this.#rounds.delete(id);
    clearTimeout(round.timer);
    if (err) round.reject(err);
    else round.resolve();
  }
}
