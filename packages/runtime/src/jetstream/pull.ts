import type { ConsumerMessages, JsMsg } from '@nats-io/jetstream';
import { JetStreamStatus, toJsMsg } from '@nats-io/jetstream/internal';
import {
  createInbox,
  nanos,
  type Msg,
  type NatsConnection,
  type Status,
  type Subscription,
} from '@nats-io/transport-node';

/** What a wait on the pulls ended with. */
export type PullWait = 'activity' | 'timeout' | 'stopped';

/** How the last pull to end went. */
export interface PullEnd {
  /** A waiting pull (`expires`, for the next message after a quiet spell), not a no_wait one. */
  waited: boolean;
  /** It brought all it asked for (more may be stored). */
  full: boolean;
  /** Messages it brought. */
  got: number;
  /** When it ended (`Date.now()`). */
  at: number;
  /**
   * It was never answered, or answered that it cannot be served yet: the loop pulls again.
   * `overdue` (its server or its consumer leader died), `reconnect` (it waited on a server
   * that is gone), `leader` (a 409 leadership change, or a 503: no consumer leader yet).
   */
  lost?: 'overdue' | 'reconnect' | 'leader';
}

/**
 * How long after it is due (at once for a `no_wait` pull, at its expiry for a waiting one) a
 * pull with no answer is taken for lost. A server answers within milliseconds; a pull held by
 * a consumer leader that was killed is never answered at all.
 */
export const PULL_ANSWER_GRACE_MS = 1_000;

/**
 * Ends for good the pulls answered on `sub`, a burst round's or consume()'s inbox (stop): it is
 * drained, an UNSUB then a PING, and what arrives until the PONG still goes to its callback.
 * The server reads them in order, and it hands a pull a message only while its reply subject
 * has a subscriber, under the connection's lock that the UNSUB takes too. So by the PONG every
 * delivery it made to the pulls has been handed over, and one it tries after finds nobody and
 * is queued for redelivery at once (nats-server 2.9.10: `nextWaiting` drops the pull,
 * `didNotDeliver` the message). A pull sent after the UNSUB (consume() pulls again as
 * deliveries come in) has no subscriber from the start: dropped the same way. In a cluster a
 * consumer leader on another server learns of the UNSUB through its route: a message it hands
 * the pull in that sub-millisecond is dropped by our server and comes back after the ack wait.
 * Bounded by `maxMs` (a connection down): what comes later is dropped, back after the ack wait
 * too.
 */
export function endPull(sub: Subscription, maxMs: number): Promise<void> {
  return within(sub.drain(), maxMs);
}

/** Resolves once `work` settles, or after `maxMs`, whichever is first; never rejects. */
export async function within(work: Promise<unknown>, maxMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, maxMs)));
  try {
    await Promise.race([work.catch(() => undefined), late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The inbox subscription a consume() iterator's pulls are answered on, for `endPull`: nats.js
 * 3.4's `PullConsumerMessagesImpl.sub`, which its public type leaves out (its `stop()` only
 * unsubscribes, and drops what is on its way).
 */
export function consumeInbox(messages: ConsumerMessages): Subscription {
  const sub = (messages as ConsumerMessages & { readonly sub?: Subscription }).sub;
  if (sub === undefined) throw new Error('consume() has no inbox subscription to end');
  return sub;
}

/**
 * One round of burst pulls (docs/events.md, "Consuming") on
 * `$JS.API.CONSUMER.MSG.NEXT.<stream>.<durable>`, one out at a time, under one wildcard inbox
 * subscription. A `no_wait` pull gets what is deliverable now and no more: its batch filled, or
 * a 404 (nothing at all) or 408 (fewer than asked) status ends it. A waiting pull (`batch: 1`
 * with `expires`) is what the loop sends when there was nothing: it ends with the next message
 * that becomes deliverable (a new one, or a nak'd one whose delay is over), or a 408 when it
 * expires, so a quiet consumer costs a wakeup per expiry instead of one per interval.
 *
 * A delivery carries its stream subject, not the pull's, so it counts against the one pull out;
 * a status comes on the pull's own reply subject (`<inbox>.<n>`), so a late one of an earlier
 * pull cannot end the next. Every delivery is kept in `buffered` until the loop takes it: none
 * is dropped while the round is open. A status no pull can get past (409 consumer deleted, 400)
 * ends the round (`gone`).
 *
 * Only the consumer's leader answers a pull, and a leader that is killed takes the pulls it
 * held with it. So a pull is taken for lost (`last.lost`) after a reconnect (the server it
 * waited on may be gone, as consume() does), on a 409 leadership change or a 503 (the consumer
 * has no leader yet), and when it is still unanswered `PULL_ANSWER_GRACE_MS` after it was due
 * (`dueInMs`, then `lose()`): the loop pulls again, and the first event after an election comes
 * within about a second of it. Should a lost pull still be answered, its deliveries are kept
 * all the same (counted against the new one, so for a moment up to twice `pullSize` may be
 * out).
 *
 * nats.js 3.4's consume() and fetch() cannot send a no_wait pull (fetch's `expires` is at least
 * 1 s and waits for it); `toJsMsg` is exported by our patch of @nats-io/jetstream, so handlers
 * get the library's own JsMsg.
 */
export class BurstPulls {
  readonly #nc: NatsConnection;
  readonly #next: string;
  readonly #inbox: string;
  readonly #ackTimeoutMs: number;
  readonly #sub: Subscription;
  readonly #status: AsyncIterable<Status> & { stop?: () => void };
  /** Deliveries not yet taken by the loop, in arrival order. */
  readonly buffered: JsMsg[] = [];
  /** The pull out (its number; 0: none), what it may still bring and what it brought. */
  #open = 0;
  #waited = false;
  /** When the pull out should have been answered by (`Date.now()`). */
  #dueAt = 0;
  #left = 0;
  #got = 0;
  #pulls = 0;
  #wake: (() => void) | undefined;
  #last: PullEnd | undefined;
  /** Why the round must end, once a status says so. */
  #gone: string | undefined;

  constructor(
    nc: NatsConnection,
    apiPrefix: string,
    stream: string,
    durable: string,
    ackTimeoutMs: number,
  ) {
    this.#nc = nc;
    this.#next = `${apiPrefix}.CONSUMER.MSG.NEXT.${stream}.${durable}`;
    this.#inbox = createInbox();
    this.#ackTimeoutMs = ackTimeoutMs;
    this.#sub = nc.subscribe(`${this.#inbox}.*`, {
      callback: (err, msg) => {
        if (err) this.#gone = `inbox subscription failed: ${err.message}`;
        else this.#take(msg);
        this.#wake?.();
      },
    });
    this.#status = nc.status();
    void this.#watch();
  }

  /** A pull is out that has not ended. */
  get open(): boolean {
    return this.#open !== 0;
  }

  /** The last pull to end; undefined before the first. */
  get last(): PullEnd | undefined {
    return this.#last;
  }

  get gone(): string | undefined {
    return this.#gone;
  }

  /** Until the pull out is overdue (0 once it is); Infinity when none is out. */
  get dueInMs(): number {
    return this.open ? Math.max(0, this.#dueAt - Date.now()) : Infinity;
  }

  /** Takes the pull out, overdue, for lost: the next one may be sent. */
  lose(): void {
    this.#ended(this.#open, false, 'overdue');
  }

  /** Sends a no_wait pull for up to `batch` messages; never while one is out. */
  pull(batch: number): void {
    this.#send(batch, 0, { batch, no_wait: true });
  }

  /** Sends a pull for the next message, answered by the server within `expiresMs`. */
  waitForNext(expiresMs: number): void {
    this.#send(1, expiresMs, { batch: 1, expires: nanos(expiresMs) });
  }

  /** Resolves on the next delivery or status, after `ms`, or when `signal` aborts. */
  wait(ms: number, signal: AbortSignal): Promise<PullWait> {
    if (signal.aborted) return Promise.resolve('stopped');
    return new Promise((resolve) => {
      const done = (how: PullWait) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        this.#wake = undefined;
        resolve(how);
      };
      const onAbort = () => done('stopped');
      const timer = setTimeout(() => done('timeout'), ms);
      signal.addEventListener('abort', onAbort, { once: true });
      this.#wake = () => done('activity');
    });
  }

  /** Ends the pull out for good (stop): see `endPull`. */
  async end(maxMs: number): Promise<void> {
    await endPull(this.#sub, maxMs);
    this.#ended(this.#open, false);
  }

  /** Ends the round's subscription: nothing is delivered to it after this. */
  close(): void {
    this.#wake = undefined;
    if (!this.#sub.isClosed()) this.#sub.unsubscribe();
    this.#status.stop?.();
  }

  async #watch(): Promise<void> {
    for await (const s of this.#status) {
      if (s.type !== 'reconnect' || !this.open) continue;
      this.#ended(this.#open, false, 'reconnect');
      this.#wake?.();
    }
  }

  /** `waitMs`: how long the server may hold it (its `expires`); 0 for a no_wait pull. */
  #send(batch: number, waitMs: number, request: object): void {
    if (this.open) throw new Error('a pull is out already');
    this.#pulls += 1;
    this.#open = this.#pulls;
    this.#waited = waitMs > 0;
    this.#dueAt = Date.now() + waitMs + PULL_ANSWER_GRACE_MS;
    this.#left = batch;
    this.#got = 0;
    this.#nc.publish(this.#next, JSON.stringify(request), {
      reply: `${this.#inbox}.${this.#pulls}`,
    });
  }

  #take(msg: Msg): void {
    if (msg.reply) {
      this.buffered.push(toJsMsg(msg, this.#ackTimeoutMs));
      if (!this.open) return;
      this.#got += 1;
      this.#left -= 1;
      if (this.#left <= 0) this.#ended(this.#open, true);
      else this.#dueAt = Math.max(this.#dueAt, Date.now() + PULL_ANSWER_GRACE_MS);
      return;
    }
    const pull = Number(msg.subject.slice(this.#inbox.length + 1));
    const status = new JetStreamStatus(msg);
    switch (status.code) {
      case 100:
        return;
      case 404:
      case 408:
        this.#ended(pull, false);
        return;
      case 503:
        this.#ended(pull, false, 'leader');
        return;
      default:
        if (status.code === 409 && status.description === 'leadership change') {
          this.#ended(pull, false, 'leader');
          return;
        }
        this.#ended(pull, false);
        this.#gone ??= `${status.code} ${status.description}`;
    }
  }

  #ended(pull: number, full: boolean, lost?: PullEnd['lost']): void {
    if (pull !== this.#open) return;
    this.#open = 0;
    this.#last = { waited: this.#waited, full, got: this.#got, at: Date.now(), lost };
  }
}
