import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type ConsumerConfig,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import { errorMessage, type Logger } from '@holdfast/runtime';

/** Creates a durable pull consumer unless it exists (every replica calls this at start). */
async function ensureDurable(
  jsm: JetStreamManager,
  stream: string,
  config: Partial<ConsumerConfig> & { durable_name: string },
): Promise<void> {
  try {
    await jsm.consumers.info(stream, config.durable_name);
  } catch (err) {
    if (!(err instanceof JetStreamApiError) || err.code !== JetStreamApiCodes.ConsumerNotFound) {
      throw err;
    }
    await jsm.consumers.add(stream, {
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.New,
      max_deliver: -1,
      ...config,
    });
  }
}

export interface PullLoopOptions {
  js: JetStreamClient;
  jsm: JetStreamManager;
  stream: string;
  /** The durable consumer, created at start unless it exists. */
  durable: Partial<ConsumerConfig> & { durable_name: string };
  /** Messages handled at once. */
  concurrency: number;
  logger: Logger;
  /** Acks, naks or terms the message; a throw naks it. */
  handle: (m: JsMsg) => Promise<void>;
}

/** Missed heartbeats (or a lost consumer) after which the loop starts a fresh consume(). */
const MAX_MISSED_HEARTBEATS = 3;
const RECONSUME_DELAY_MS = 1_000;

/**
 * The re-consume loop every JetStream reader of the alerter runs: consume(), hand each
 * message to `handle` (which acks, naks or terms it) with at most `concurrency` in flight,
 * watch the status stream, and start over when heartbeats stop or the consumer disappears.
 */
export class PullLoop {
  readonly #opts: PullLoopOptions;
  #stopped = false;
  #consuming = false;
  #messages: ConsumerMessages | undefined;
  readonly #inflight = new Set<Promise<void>>();
  #done: Promise<void> = Promise.resolve();

  constructor(opts: PullLoopOptions) {
    this.#opts = opts;
  }

  async start(): Promise<void> {
    await ensureDurable(this.#opts.jsm, this.#opts.stream, this.#opts.durable);
    this.#done = this.#run();
  }

  /** true while a consume() is running (for /readyz). */
  get consuming(): boolean {
    return this.#consuming;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#messages?.stop();
    await this.#done;
    await Promise.allSettled([...this.#inflight]);
  }

  async #run(): Promise<void> {
    const { js, stream, concurrency, logger } = this.#opts;
    const consumer = this.#opts.durable.durable_name;
    while (!this.#stopped) {
      try {
        // Again on every round: a consumer deleted under us is created anew.
        await ensureDurable(this.#opts.jsm, stream, this.#opts.durable);
        const c = await js.consumers.get(stream, consumer);
        const messages = await c.consume({ max_messages: concurrency, idle_heartbeat: 5_000 });
        this.#messages = messages;
        this.#consuming = true;
        void this.#watch(messages);
        for await (const m of messages) {
          while (this.#inflight.size >= concurrency) await Promise.race(this.#inflight);
          const p: Promise<void> = this.#opts
            .handle(m)
            .catch((err: unknown) => {
              logger.error({ err: errorMessage(err), seq: m.seq }, 'message handler threw');
              m.nak(RECONSUME_DELAY_MS);
            })
            .finally(() => this.#inflight.delete(p));
          this.#inflight.add(p);
        }
      } catch (err) {
        logger.warn({ err: errorMessage(err), stream, consumer }, 'consume failed');
      }
      this.#consuming = false;
      if (!this.#stopped) await new Promise((r) => setTimeout(r, RECONSUME_DELAY_MS));
    }
  }

  async #watch(messages: ConsumerMessages): Promise<void> {
    const { logger, stream } = this.#opts;
    const consumer = this.#opts.durable.durable_name;
    for await (const s of messages.status()) {
      const lost =
        (s.type === 'heartbeats_missed' && s.count >= MAX_MISSED_HEARTBEATS) ||
        s.type === 'consumer_deleted' ||
        (s.type === 'consumer_not_found' && s.count >= MAX_MISSED_HEARTBEATS);
      if (lost) {
        logger.warn({ status: s.type, stream, consumer }, 'consumer lost; consuming again');
        messages.stop();
        return;
      }
    }
  }
}
