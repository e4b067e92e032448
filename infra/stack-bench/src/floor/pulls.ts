import { createInbox, nanos, type Msg, type NatsConnection } from '@nats-io/transport-node';

/** How a pull ended: asked for `asked`, got `got`, and whether it was a waiting one. */
export interface PullEnd {
  waited: boolean;
  asked: number;
  got: number;
  /** It ended on a status other than 404 (nothing) or 408 (fewer than asked, or expired). */
  failed: boolean;
}

/**
 * What follows a pull, as the real consumers' bursts (docs/events.md, "Consuming"): one that
 * came back full at once (more may be stored), one that found nothing a waiting pull for the
 * next message, anything else the next burst `everyMs` later.
 */
export function nextPull(end: PullEnd): 'now' | 'wait' | 'later' {
  if (end.failed) return 'later';
  if (!end.waited && end.got >= end.asked) return 'now';
  if (end.got === 0) return 'wait';
  return 'later';
}

/**
 * A durable pull consumer fed in bursts, written plainly: one `no_wait` pull of up to `batch`
 * on `$JS.API.CONSUMER.MSG.NEXT.<stream>.<durable>` every `everyMs`, one out at a time, on one
 * inbox; every delivery of a pull is handed over at once when the pull ends. The handler acks.
 */
export class BurstPuller {
  readonly #inbox = createInbox();
  readonly #next: string;
  #taken: Msg[] = [];
  #asked = 0;
  #waited = false;
  #failed = false;
  #open = false;
  #stopped = false;
  #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly nc: NatsConnection,
    stream: string,
    durable: string,
    private readonly o: {
      batch: number;
      everyMs: number;
      /** A waiting pull's expiry. */
      waitMs: number;
      onMessages: (msgs: Msg[]) => void;
    },
  ) {
    this.#next = `$JS.API.CONSUMER.MSG.NEXT.${stream}.${durable}`;
  }

  start(): void {
    this.nc.subscribe(this.#inbox, { callback: (err, m) => (err ? undefined : this.#on(m)) });
    this.#pull(false);
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #pull(waited: boolean): void {
    this.#open = true;
    this.#waited = waited;
    this.#failed = false;
    this.#asked = waited ? 1 : this.o.batch;
    const request = waited
      ? { batch: 1, expires: nanos(this.o.waitMs) }
      : { batch: this.o.batch, no_wait: true };
    this.nc.publish(this.#next, JSON.stringify(request), { reply: this.#inbox });
  }

  #on(m: Msg): void {
    if (m.reply) {
      this.#taken.push(m);
      if (this.#taken.length < this.#asked) return;
    } else {
      // A status (no reply subject): 404 nothing stored, 408 fewer than asked or expired.
      const code = m.headers?.code ?? 0;
      this.#failed = code !== 404 && code !== 408;
    }
    this.#end();
  }

  #end(): void {
    if (!this.#open) return;
    this.#open = false;
    const taken = this.#taken;
    this.#taken = [];
    if (taken.length > 0) this.o.onMessages(taken);
    if (this.#stopped) return;
    const next = nextPull({
      waited: this.#waited,
      asked: this.#asked,
      got: taken.length,
      failed: this.#failed,
    });
    if (next === 'now') this.#pull(false);
    else if (next === 'wait') this.#pull(true);
    else this.#timer = setTimeout(() => this.#pull(false), this.o.everyMs);
  }
}
