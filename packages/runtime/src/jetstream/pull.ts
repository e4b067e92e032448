import type { JsMsg } from '@nats-io/jetstream';
import { JetStreamStatus, toJsMsg } from '@nats-io/jetstream/internal';
import {
  createInbox,
  type Msg,
  type NatsConnection,
  type Subscription,
} from '@nats-io/transport-node';

/** What a wait on the pulls ended with. */
export type PullWait = 'activity' | 'timeout' | 'stopped';

/**
 * One round of burst pulls (docs/events.md, "Consuming"): `no_wait` pull requests on
 * `$JS.API.CONSUMER.MSG.NEXT.<stream>.<durable>`, one out at a time, under one wildcard inbox
 * subscription. A no_wait pull gets what is deliverable now and no more: its batch filled, or a
 * 404 (nothing at all) or 408 (fewer than asked) status ends it. A delivery carries its stream
 * subject, not the pull's, so it counts against the one pull out; a status comes on the pull's
 * own reply subject (`<inbox>.<n>`), so a late one of an earlier pull cannot end the next.
 * Every delivery is kept in `buffered` until the loop takes it: none is dropped while the round
 * is open. A status no pull can get past (409 consumer deleted, 503 no responders, 400) ends
 * the round (`gone`).
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
  /** Deliveries not yet taken by the loop, in arrival order. */
  readonly buffered: JsMsg[] = [];
  /** The pull out (its number) and how many messages it may still bring; 0: none out. */
  #open = 0;
  #left = 0;
  #pulls = 0;
  #wake: (() => void) | undefined;
  /** Whether the last pull to end was filled (more is likely stored: pull again at once). */
  #lastFull = false;
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
  }

  /** A pull is out that has not ended (filled, or a 404/408). */
  get open(): boolean {
    return this.#open !== 0;
  }

  get lastFull(): boolean {
    return this.#lastFull;
  }

  get gone(): string | undefined {
    return this.#gone;
  }

  /** Sends one no_wait pull for up to `batch` messages; never while one is out. */
  pull(batch: number): void {
    if (this.open) throw new Error('a pull is out already');
    this.#pulls += 1;
    this.#open = this.#pulls;
    this.#left = batch;
    this.#nc.publish(this.#next, JSON.stringify({ batch, no_wait: true }), {
      reply: `${this.#inbox}.${this.#pulls}`,
    });
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

  /** Ends the round's subscription: nothing is delivered to it after this. */
  close(): void {
    this.#wake = undefined;
    this.#sub.unsubscribe();
  }

  #take(msg: Msg): void {
    if (msg.reply) {
      this.buffered.push(toJsMsg(msg, this.#ackTimeoutMs));
      this.#left -= 1;
      if (this.open && this.#left <= 0) this.#ended(this.#open, true);
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
      default:
        this.#ended(pull, false);
        this.#gone ??= `${status.code} ${status.description}`;
    }
  }

  #ended(pull: number, full: boolean): void {
    if (pull !== this.#open) return;
    this.#open = 0;
    this.#lastFull = full;
  }
}
