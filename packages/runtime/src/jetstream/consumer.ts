import { Backoff, sleep, type RetryPolicy } from '@holdfast/retry';
import {
  JetStreamApiCodes,
  JetStreamApiError,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import { millis, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { errorMessage } from '../errors.js';
import type { Logger } from '../logger.js';
import { ensureDurable, type DurableConfig } from './durable.js';
import { DEFAULT_ACK_WAIT_MS, nakLater, workingEveryMs } from './messages.js';
import { BurstPulls, consumeInbox, endPull, PULL_ANSWER_GRACE_MS, within } from './pull.js';

/** Deliveries in bursts: one `no_wait` pull every `everyMs` instead of consume(). */
export interface Bursts {
  /** Pause between two pulls (none after a pull that came back full). */
  everyMs: number;
}

export interface DurableConsumerOptions {
  /**
   * The connection `js` and `jsm` were made from: burst pulls are plain requests on it, and
   * stop() flushes it.
   */
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  stream: string;
  /** Created at start, or brought to these settings (see `ensureDurable`). */
  durable: DurableConfig;
  /** Messages pulled ahead of the handler (consume's `max_messages`, a burst pull's `batch`). */
  pullSize: number;
  /**
   * Pull in bursts (one socket read and wakeup for many messages) instead of consume()'s
   * delivery of each message as it is stored. Absent: consume().
   */
  bursts?: Bursts;
  /**
   * Handler calls at once. 1 keeps the stream's order and makes a returned promise the
   * backpressure: nothing more is handed over while it waits.
   */
  concurrency?: number;
  /**
   * Handles one message and acks it after its side effect, naks it with a delay, or terms it
   * with a dead letter. `undefined` means "taken, go on" (no promise per message on a hot
   * path). A throw or a rejection is a bug: logged, and the message nak'ed with `redeliver`.
   */
  onMessage: (msg: JsMsg) => Promise<void> | undefined;
  /**
   * Messages the handler took (`onMessage` returned `undefined`) and still holds unsettled (a
   * batch filling, or waiting for its insert), of those it took at least `minAgeMs` ago: they
   * get `working()` with the ones in flight, so holding them longer than the ack wait does not
   * redeliver them. Younger ones were delivered or kept alive within that time (`minAgeMs` is
   * the keep-alive period, or 0), so a batch settled within it costs no signal.
   */
  held?: (minAgeMs: number) => Iterable<JsMsg>;
  /** Wait between two consume() runs; back to the start once a message arrives. */
  restart: RetryPolicy;
  /** Delay of the nak after a handler failed, by delivery count. */
  redeliver: RetryPolicy;
  /**
   * Missed idle heartbeats after which consume() starts afresh (server or consumer gone); in
   * bursts, periods of `idleHeartbeatMs` without an answer to an open pull.
   */
  maxMissedHeartbeats: number;
  /** Idle heartbeat asked of the server; in bursts, the silence that counts as one missed. */
  idleHeartbeatMs?: number;
  /** Life of one pull request. */
  expiresMs?: number;
  logger: Logger;
}

/** In bursts, the longest a waiting pull (the one after a pull that found nothing) lasts. */
const IDLE_WAIT_MAX_MS = 1_000;
/**
 * In bursts, the pause before pulling again after a pull the server could not serve (no
 * consumer leader yet: a 503, a 409 leadership change), so an election is not a busy loop.
 */
const LEADERLESS_PAUSE_MS = 250;
/**
 * After stop(), how long a round trip to the server is waited for: the drain that ends the
 * pulls still out, the flush of the naks and acks stop() leaves.
 */
const STOP_FLUSH_MAX_MS = 1_000;

/**
 * Resolves once what was published on `nc` reached the server (a PING answered after it), or
 * after `STOP_FLUSH_MAX_MS` (a connection down or closed). A nak is a publish, written on the
 * next turn of the event loop: a connection closed (not drained) right after stop() would
 * drop it, and the message would come back only after the ack wait.
 */
function written(nc: NatsConnection): Promise<void> {
  return within(nc.flush(), STOP_FLUSH_MAX_MS);
}

/**
 * The one JetStream consume loop (docs/events.md, "Consuming"): ensure the durable, consume,
 * watch heartbeats and the consumer's fate, and start again with backoff whenever the
 * iterator ends. While a handler's promise is pending its message gets `working()` at a third
 * of the ack wait (every handler bounds its own work with timeouts), and so do the messages a
 * handler holds (`held`). With `bursts`, each round
 * pulls instead of consuming (`#pullRound`). `stop()` is the same for both: it ends the pulls
 * out at once (`endPull`: what the server sent them before it read the UNSUB still arrives),
 * naks what they brought and what is buffered, so another replica gets it at once, waits for
 * the handlers still running, and returns once its naks and acks reached the server.
 */
export class DurableConsumer {
  readonly #o: DurableConsumerOptions;
  readonly #inflight = new Map<Promise<void>, JsMsg>();
  readonly #stop = new AbortController();
  /** Taken by a round but not handed over (after stop, or a throw): nak'd as the round ends. */
  readonly #handBack: JsMsg[] = [];
  #pulls: BurstPulls | undefined;
  #loop: Promise<void> | undefined;
  #working: NodeJS.Timeout | undefined;
  #consuming = false;
  #restarts = 0;
  #ackWaitMs = DEFAULT_ACK_WAIT_MS;

  constructor(opts: DurableConsumerOptions) {
    this.#o = opts;
  }

  /** True while a consume() iterator (or a round of burst pulls) is open (for /readyz). */
  get consuming(): boolean {
    return this.#consuming;
  }

  /** How many times consume() was started again. */
  get restarts(): number {
    return this.#restarts;
  }

  /** Ensures the durable (a failure here fails the service's start), then consumes. */
  async start(): Promise<void> {
    if (this.#loop) return;
    await ensureDurable(this.#o.jsm, this.#o.stream, this.#o.durable);
    const ackWait = this.#o.durable.ack_wait;
    const ackWaitMs = ackWait === undefined ? DEFAULT_ACK_WAIT_MS : millis(ackWait);
    this.#ackWaitMs = ackWaitMs;
    const everyMs = workingEveryMs(ackWaitMs);
    const held = this.#o.held;
    // A held message younger than a period may wait one more (up to two periods since its
    // delivery or last signal), which the ack wait allows only when it spans three periods
    // (not under the 500 ms floor with an ack wait below 1.5 s: then all are kept each time).
    const heldMinAgeMs = 3 * everyMs <= ackWaitMs ? everyMs : 0;
    this.#working = setInterval(() => {
      for (const m of this.#inflight.values()) m.working();
      // Pulled and waiting behind the handler's backpressure: kept too.
      for (const m of this.#pulls?.buffered ?? []) m.working();
      // Taken by the handler and held since the previous signal at least.
      if (held) for (const m of held(heldMinAgeMs)) m.working();
    }, everyMs);
    // The connection keeps the process alive, not this timer.
    this.#working.unref();
    this.#loop = this.#run();
  }

  /**
   * Both loops see the abort and end their pulls (`endPull`); the handlers still running are
   * waited for, then `settle` (what settles the `held` messages: the last batch's insert), whose
   * messages are kept alive meanwhile; then every nak and ack is flushed.
   */
  async stop(settle?: () => Promise<void>): Promise<void> {
    this.#stop.abort();
    await this.#loop;
    await Promise.allSettled([...this.#inflight.keys()]);
    try {
      await settle?.();
    } finally {
      clearInterval(this.#working);
    }
    await written(this.#o.nc);
  }

  async #run(): Promise<void> {
    const { jsm, stream, durable, logger } = this.#o;
    const backoff = new Backoff(this.#o.restart);
    const stopped = this.#stop.signal;
    while (!stopped.aborted) {
      try {
        // Again on every round: a consumer deleted under us is created anew.
        await ensureDurable(jsm, stream, durable);
        if (this.#o.bursts) await this.#pullRound(this.#o.bursts, backoff);
        else await this.#consumeRound(backoff);
      } catch (err) {
        logger.warn({ err: errorMessage(err), stream }, 'consume loop failed');
      } finally {
        this.#consuming = false;
        await this.#handBackAll();
      }
      if (stopped.aborted) break;
      const delayMs = backoff.next();
      this.#restarts += 1;
      logger.info({ delayMs, stream, durable: durable.durable_name }, 'consuming again');
      await sleep(delayMs, stopped);
    }
  }

  /**
   * One consume() iterator, until it ends (stop, heartbeats missed, consumer gone). On stop
   * its pulls are ended as a burst pull is (`endPull` on the iterator's inbox subscription),
   * and the iterator after: what they brought until then is handed back below.
   */
  async #consumeRound(backoff: Backoff): Promise<void> {
    const { js, stream, durable, logger } = this.#o;
    const stopped = this.#stop.signal;
    const consumer = await js.consumers.get(stream, durable.durable_name);
    const messages = await consumer.consume({
      max_messages: this.#o.pullSize,
      idle_heartbeat: this.#o.idleHeartbeatMs ?? 5_000,
      expires: this.#o.expiresMs ?? 30_000,
    });
    let inbox: Subscription;
    try {
      inbox = consumeInbox(messages);
    } catch (err) {
      messages.stop();
      throw err;
    }
    const end = () => void endPull(inbox, STOP_FLUSH_MAX_MS).then(() => messages.stop());
    // stop() may have come while this round was being set up.
    if (stopped.aborted) end();
    else stopped.addEventListener('abort', end, { once: true });
    void this.#watch(messages);
    this.#consuming = true;
    logger.info({ stream, durable: durable.durable_name }, 'consuming');
    try {
      for await (const m of messages) {
        backoff.reset();
        if (stopped.aborted) {
          this.#handBack.push(m);
          continue;
        }
        const wait = this.#handle(m);
        if (wait) await wait;
      }
    } finally {
      stopped.removeEventListener('abort', end);
    }
  }

  /**
   * One round of burst pulls (see `BurstPulls`), until the consumer or the server is gone or
   * stop(). One pull out at a time, and only once every delivery was handed over and the
   * handler holds no backpressure: never more than `pullSize` pulled ahead of the handler.
   * A pull that came back full is followed at once (a backlog drains at full speed), any other
   * `everyMs` after the one before; one that found nothing by a waiting pull for the next
   * message (it expires within a second, or half the idle heartbeat), so a quiet consumer does
   * not wake every interval and the first event after a quiet spell comes at once. A pull
   * the consumer's leader took with it (killed, or stepped down) is pulled again once it is
   * overdue, and one the server could not serve (no leader yet) `LEADERLESS_PAUSE_MS` later,
   * after one lookup of the consumer (one deleted under the loop ends the round), so the round
   * outlives an election and the first event after it comes at once. Each
   * `idleHeartbeatMs` without any answer counts as a missed heartbeat (the consumer is looked
   * up: one deleted ends the round at once); `maxMissedHeartbeats` in a row end the round.
   */
  async #pullRound(bursts: Bursts, backoff: Backoff): Promise<void> {
    const { js, stream, durable, pullSize, maxMissedHeartbeats, logger } = this.#o;
    const name = durable.durable_name;
    const stopped = this.#stop.signal;
    const silenceMs = this.#o.idleHeartbeatMs ?? 5_000;
    const pulls = new BurstPulls(
      this.#o.nc,
      js.apiPrefix,
      stream,
      name,
      js.getOptions().timeout ?? 5_000,
    );
    this.#pulls = pulls;
    const { everyMs } = bursts;
    const idleWaitMs = Math.min(IDLE_WAIT_MAX_MS, Math.floor(silenceMs / 2));
    let missed = 0;
    /** When the consumer's leader last answered: a delivery, or a pull it ended. */
    let heardAt = Date.now();
    /** The consumer was looked up since `heardAt` (after a pull no leader took). */
    let lookedUp = false;
    let sentAt = 0;
    let end: string | undefined;
    this.#consuming = true;
    logger.info({ stream, durable: name, everyMs }, 'consuming in bursts');
    try {
      for (;;) {
        // Every delivery is handed over (back, after stop) before anything else is decided.
        for (let m = pulls.buffered.shift(); m; m = pulls.buffered.shift()) {
          backoff.reset();
          missed = 0;
          heardAt = Date.now();
          if (stopped.aborted) {
            this.#handBack.push(m);
            continue;
          }
          const wait = this.#handle(m);
          if (wait) await wait;
        }
        end ??= pulls.gone;
        if (end !== undefined) {
          logger.warn({ reason: end, stream, durable: name }, 'consumer gone: consuming again');
          return;
        }
        if (stopped.aborted) {
          // No pull after stop. One still out (a waiting pull holds for up to a second) is
          // ended at once; what it brought until then is handed back above.
          if (!pulls.open) return;
          await pulls.end(STOP_FLUSH_MAX_MS);
          continue;
        }
        const last = pulls.last;
        if (last && !last.lost && last.at > heardAt) {
          heardAt = last.at;
          missed = 0;
          lookedUp = false;
        }
        const silentUntil = heardAt + silenceMs * (missed + 1);
        if (Date.now() >= silentUntil) {
          missed += 1;
          logger.warn({ count: missed, stream, durable: name }, 'JetStream pull unanswered');
          if (await this.#consumerGone(Math.min(silenceMs, PULL_ANSWER_GRACE_MS))) {
            end = 'consumer not found';
          } else if (missed >= maxMissedHeartbeats) end = `${missed} pulls unanswered`;
          continue;
        }
        if (pulls.open) {
          const how = await pulls.wait(Math.min(pulls.dueInMs, silentUntil - Date.now()), stopped);
          // Held by a leader that is gone, or by a server that is: pulled again at once.
          if (how === 'timeout' && pulls.dueInMs === 0) pulls.lose();
          continue;
        }
        if (last?.lost === 'leader' && !lookedUp) {
          // No leader took it: an election, or a consumer deleted under the loop.
          lookedUp = true;
          if (await this.#consumerGone(Math.min(silenceMs, PULL_ANSWER_GRACE_MS))) {
            end = 'consumer not found';
          }
          continue;
        }
        if (last?.lost === 'leader' && Date.now() < last.at + LEADERLESS_PAUSE_MS) {
          await pulls.wait(last.at + LEADERLESS_PAUSE_MS - Date.now(), stopped);
          continue;
        }
        if (last?.got === 0) {
          // Nothing stored: one waiting pull for the next message, not one pull per interval.
          pulls.waitForNext(idleWaitMs);
          continue;
        }
        // After a full pull at once (a backlog), else an interval after the last no_wait pull
        // was sent, or after a waiting pull brought the first message of a quiet spell.
        const pauseMs =
          last?.full && !last.waited ? 0 : (last?.waited ? last.at : sentAt) + everyMs - Date.now();
        if (pauseMs > 0) {
          // Woken early only by a late delivery (handed over above) or stop.
          await pulls.wait(pauseMs, stopped);
          continue;
        }
        sentAt = Date.now();
        pulls.pull(pullSize); // nothing is buffered here: the loop above took it all
      }
    } finally {
      pulls.close();
      this.#pulls = undefined;
      // Nothing is left here but after a throw: handed back for another delivery at once.
      this.#handBack.push(...pulls.buffered.splice(0));
    }
  }

  /**
   * Naks what the round took but did not hand over, once its pulls are ended, so another
   * replica gets it at once. First a consumer info, which makes nats-server 2.9.10 drop the
   * waiting pulls no subscriber is left for (`processWaiting`): a nak that finds only such
   * pulls is lost there (the redelivery is popped for a pull `nextWaiting` then discards, and
   * the consumer's position is stepped back one: the message comes back after the ack wait, and
   * the one before its position is delivered again). Bounded by `STOP_FLUSH_MAX_MS`.
   */
  async #handBackAll(): Promise<void> {
    const msgs = this.#handBack.splice(0);
    if (msgs.length === 0) return;
    await this.#consumerGone(STOP_FLUSH_MAX_MS);
    for (const m of msgs) m.nak();
  }

  /**
   * True when the durable (or its stream) is known to be gone; false when unsure, or when the
   * lookup itself has no answer within `waitMs` (a silent server: one more missed pull).
   */
  async #consumerGone(waitMs: number): Promise<boolean> {
    const { jsm, stream, durable } = this.#o;
    const gone = jsm.consumers.info(stream, durable.durable_name).then(
      () => false,
      (err: unknown) =>
        err instanceof JetStreamApiError &&
        (err.code === JetStreamApiCodes.ConsumerNotFound ||
          err.code === JetStreamApiCodes.StreamNotFound),
    );
    let timer: NodeJS.Timeout | undefined;
    const unsure = new Promise<false>((resolve) => (timer = setTimeout(resolve, waitMs, false)));
    try {
      return await Promise.race([gone, unsure]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Starts the handler; returns a promise only when the loop must wait before the next one. */
  #handle(m: JsMsg): Promise<unknown> | undefined {
    let work: Promise<void> | undefined;
    try {
      work = this.#o.onMessage(m);
    } catch (err) {
      this.#failed(m, err);
      return undefined;
    }
    if (!work) return undefined;
    const tracked: Promise<void> = work
      .catch((err: unknown) => this.#failed(m, err))
      .finally(() => this.#inflight.delete(tracked));
    this.#inflight.set(tracked, m);
    if (this.#inflight.size < (this.#o.concurrency ?? 1)) return undefined;
    return Promise.race(this.#inflight.keys());
  }

  #failed(m: JsMsg, err: unknown): void {
    const delayMs = nakLater(m, this.#o.redeliver, this.#ackWaitMs);
    this.#o.logger.error(
      { err: errorMessage(err), subject: m.subject, seq: m.seq, delayMs },
      'message handler failed (a bug): handed back for redelivery',
    );
  }

  async #watch(messages: ConsumerMessages): Promise<void> {
    const { logger, maxMissedHeartbeats } = this.#o;
    for await (const s of messages.status()) {
      switch (s.type) {
        case 'heartbeats_missed':
          logger.warn({ count: s.count }, 'JetStream heartbeats missed');
          if (s.count >= maxMissedHeartbeats) messages.stop();
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
  }
}
