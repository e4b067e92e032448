import { Backoff, sleep, type RetryPolicy } from '@holdfast/retry';
import type {
  ConsumerMessages,
  JetStreamClient,
  JetStreamManager,
  JsMsg,
} from '@nats-io/jetstream';
import { millis } from '@nats-io/transport-node';
import { errorMessage } from '../errors.js';
import type { Logger } from '../logger.js';
import { ensureDurable, type DurableConfig } from './durable.js';
import { nakLater, workingEveryMs } from './messages.js';

export interface DurableConsumerOptions {
  js: JetStreamClient;
  jsm: JetStreamManager;
  stream: string;
  /** Created at start, or brought to these settings (see `ensureDurable`). */
  durable: DurableConfig;
  /** Messages pulled ahead of the handler (consume's `max_messages`). */
  pullSize: number;
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
  /** Wait between two consume() runs; back to the start once a message arrives. */
  restart: RetryPolicy;
  /** Delay of the nak after a handler failed, by delivery count. */
  redeliver: RetryPolicy;
  /** Missed idle heartbeats after which consume() starts afresh (server or consumer gone). */
  maxMissedHeartbeats: number;
  /** Idle heartbeat asked of the server. */
  idleHeartbeatMs?: number;
  /** Life of one pull request. */
  expiresMs?: number;
  logger: Logger;
}

/** The server's default ack wait, for a durable whose config does not set one. */
const DEFAULT_ACK_WAIT_MS = 30_000;

/**
 * The one JetStream consume loop (docs/events.md, "Consuming"): ensure the durable, consume,
 * watch heartbeats and the consumer's fate, and start again with backoff whenever the
 * iterator ends. While a handler's promise is pending its message gets `working()` at a third
 * of the ack wait (every handler bounds its own work with timeouts). `stop()` naks what is
 * buffered, so another replica gets it at once, and waits for the handlers still running.
 */
export class DurableConsumer {
  readonly #o: DurableConsumerOptions;
  readonly #inflight = new Map<Promise<void>, JsMsg>();
  readonly #stop = new AbortController();
  #messages: ConsumerMessages | undefined;
  #loop: Promise<void> | undefined;
  #working: NodeJS.Timeout | undefined;
  #consuming = false;
  #restarts = 0;

  constructor(opts: DurableConsumerOptions) {
    this.#o = opts;
  }

  /** True while a consume() iterator is open (for /readyz). */
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
    this.#working = setInterval(() => {
      for (const m of this.#inflight.values()) m.working();
    }, workingEveryMs(ackWaitMs));
    // The connection keeps the process alive, not this timer.
    this.#working.unref();
    this.#loop = this.#run();
  }

  async stop(): Promise<void> {
    this.#stop.abort();
    this.#messages?.stop();
    await this.#loop;
    await Promise.allSettled([...this.#inflight.keys()]);
    clearInterval(this.#working);
  }

  async #run(): Promise<void> {
    const { js, jsm, stream, durable, logger } = this.#o;
    const backoff = new Backoff(this.#o.restart);
    const stopped = this.#stop.signal;
    while (!stopped.aborted) {
      try {
        // Again on every round: a consumer deleted under us is created anew.
        await ensureDurable(jsm, stream, durable);
        const consumer = await js.consumers.get(stream, durable.durable_name);
        const messages = await consumer.consume({
          max_messages: this.#o.pullSize,
          idle_heartbeat: this.#o.idleHeartbeatMs ?? 5_000,
          expires: this.#o.expiresMs ?? 30_000,
        });
        this.#messages = messages;
        // stop() may have come while this round was being set up.
        if (stopped.aborted) messages.stop();
        void this.#watch(messages);
        this.#consuming = true;
        logger.info({ stream, durable: durable.durable_name }, 'consuming');
        for await (const m of messages) {
          backoff.reset();
          if (stopped.aborted) {
            m.nak();
            continue;
          }
          const wait = this.#handle(m);
          if (wait) await wait;
        }
      } catch (err) {
        logger.warn({ err: errorMessage(err), stream }, 'consume loop failed');
      } finally {
        this.#consuming = false;
      }
      if (stopped.aborted) break;
      const delayMs = backoff.next();
      this.#restarts += 1;
      logger.info({ delayMs, stream, durable: durable.durable_name }, 'consuming again');
      await sleep(delayMs, stopped);
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
    const delayMs = nakLater(m, this.#o.redeliver);
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
