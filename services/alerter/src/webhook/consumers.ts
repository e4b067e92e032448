import { errorMessage, type DurableConsumer, type Logger } from '@holdfast/runtime';
import {
  JetStreamApiCodes,
  JetStreamApiError,
  type ConsumerInfo,
  type JetStreamManager,
} from '@nats-io/jetstream';
import type { AlerterNames } from '../env.js';
import type { ConfigSource } from '../holdfast-config.js';
import type { AlerterMetrics } from '../metrics.js';

/** A webhook's own consumer, filtered on its jobs' subject. */
export const consumerOf = (hookId: string) => `deliver-${hookId}`;
const CONSUMER_PREFIX = consumerOf('');

/** A stream the deliverer takes jobs from, and its consumer loops on this replica by webhook. */
export interface JobSource {
  stream: string;
  /** Each webhook's jobs are on `<prefix>.<webhook>`. */
  prefix: string;
  loops: Map<string, DurableConsumer>;
}

export interface WebhookConsumersOptions {
  jsm: JetStreamManager;
  names: AlerterNames;
  config: ConfigSource;
  logger: Logger;
  metrics: AlerterMetrics;
  /** A (not started) consumer loop of one webhook's jobs on `source`. */
  loop: (source: JobSource, hookId: string) => DurableConsumer;
}

/**
 * Which webhooks have a consumer loop on this replica, on the queue and on the work queue an
 * older version left, matched to the config and to what the streams hold by `sync()`.
 *
 * The queue keeps acked jobs (limits retention, queue.ts), so what is left to do is read from
 * each consumer's own state (`num_pending` + `num_ack_pending`), not from what is stored: a
 * webhook removed from the config keeps its consumer (its jobs are dropped and recorded)
 * until it has nothing pending; then the jobs it acked are purged and it is deleted, so the
 * webhook added back later (a new consumer, from the start of what is stored) is sent none of
 * them. Jobs stored for a webhook with no consumer were queued after that purge (a replica on
 * an older config): they get a consumer, which drops and records them.
 */
export class WebhookConsumers {
  readonly #o: WebhookConsumersOptions;
  readonly #queue: JobSource;
  /** The older versions' work queue while it may exist: drained, then deleted. */
  #legacy: JobSource | undefined;
  #syncing: Promise<void> = Promise.resolve();
  #stopping = false;

  constructor(opts: WebhookConsumersOptions) {
    this.#o = opts;
    const { names } = opts;
    this.#queue = {
      stream: names.webhookStream,
      prefix: names.webhookSubjectPrefix,
      loops: new Map(),
    };
    this.#legacy = {
      stream: names.legacyWebhookStream,
      prefix: names.legacyWebhookSubjectPrefix,
      loops: new Map(),
    };
  }

  get consuming(): boolean {
    for (const loop of this.#allLoops()) if (!loop.consuming) return false;
    return true;
  }

  /** One sync at a time; none after `stop()`. */
  sync(): Promise<void> {
    const run = this.#syncing.then(() => this.#sync());
    this.#syncing = run.catch(() => undefined);
    return run;
  }

  /** Waits for a sync under way, then stops every loop (each hands back what it pulled). */
  async stop(): Promise<void> {
    this.#stopping = true;
    await this.#syncing;
    await Promise.all([...this.#allLoops()].map((loop) => loop.stop()));
  }

  *#allLoops(): Iterable<DurableConsumer> {
    yield* this.#queue.loops.values();
    if (this.#legacy) yield* this.#legacy.loops.values();
  }

  async #sync(): Promise<void> {
    if (this.#stopping) return;
    // The older work queue is drained even while the queue's consumers fail, and the other way.
    const failures: Error[] = [];
    const keep = (err: unknown) =>
      void failures.push(err instanceof Error ? err : new Error(errorMessage(err)));
    await this.#syncQueue().catch(keep);
    await this.#syncLegacy().catch(keep);
    if (failures[0]) throw failures[0];
  }

  async #syncQueue(): Promise<void> {
    const source = this.#queue;
    const { jsm } = this.#o;
    const inConfig = new Set(this.#o.config.current.raw.webhooks.map((w) => w.id));
    const consumers = new Map<string, ConsumerInfo>();
    for await (const c of jsm.consumers.list(source.stream)) {
      if (c.name.startsWith(CONSUMER_PREFIX))
        consumers.set(c.name.slice(CONSUMER_PREFIX.length), c);
    }
    const stored = await this.#storedHooks(source);
    const wanted = new Set(inConfig);
    for (const id of new Set([...consumers.keys(), ...stored, ...source.loops.keys()])) {
      if (inConfig.has(id) || this.#stopping) continue;
      const c = consumers.get(id);
      if (c && c.num_pending + c.num_ack_pending === 0) await this.#retire(source, id, c);
      // Jobs left of a webhook gone from the config: a consumer drops and records them.
      else if (c || stored.has(id)) wanted.add(id);
      else await this.#stopLoop(source, id);
    }
    await this.#startLoops(source, wanted);
  }

  /**
   * A removed webhook's consumer with nothing pending: its loop stops, the jobs it acked are
   * purged (only those: a job queued meanwhile stays, and the next sync gives it a consumer),
   * and it is deleted.
   */
  async #retire(source: JobSource, id: string, c: ConsumerInfo): Promise<void> {
    await this.#stopLoop(source, id);
    const filter = `${source.prefix}.${id}`;
    await this.#o.jsm.streams.purge(source.stream, { filter, seq: c.ack_floor.stream_seq + 1 });
    await this.#o.jsm.consumers.delete(source.stream, consumerOf(id)).catch(() => undefined);
  }

  /**
   * The work queue of older versions, where an ack deletes the job: each webhook with jobs
   * there has a consumer until they are all taken; once it holds none, it is deleted.
   */
  async #syncLegacy(): Promise<void> {
    const source = this.#legacy;
    if (!source || this.#stopping) return;
    let stored: Set<string>;
    try {
      stored = await this.#storedHooks(source);
    } catch (err) {
      if (!(err instanceof JetStreamApiError) || err.code !== JetStreamApiCodes.StreamNotFound) {
        throw err;
      }
      await this.#dropLegacy(source);
      return;
    }
    for (const id of source.loops.keys()) {
      if (stored.has(id)) continue;
      await this.#stopLoop(source, id);
      await this.#o.jsm.consumers.delete(source.stream, consumerOf(id)).catch(() => undefined);
    }
    if (stored.size > 0) {
      await this.#startLoops(source, stored);
      return;
    }
    await this.#dropLegacy(source);
    const deleted = await this.#o.jsm.streams.delete(source.stream).catch(() => false);
    if (deleted) {
      this.#o.logger.info({ stream: source.stream }, 'older webhook work queue drained, deleted');
    }
  }

  async #dropLegacy(source: JobSource): Promise<void> {
    this.#legacy = undefined;
    await Promise.all([...source.loops.values()].map((loop) => loop.stop()));
    source.loops.clear();
  }

  /** The webhooks with jobs stored on `source` (on the queue, acked ones count too). */
  async #storedHooks(source: JobSource): Promise<Set<string>> {
    const prefix = `${source.prefix}.`;
    const info = await this.#o.jsm.streams.info(source.stream, { subjects_filter: `${prefix}>` });
    const ids = new Set<string>();
    for (const [subject, count] of Object.entries(info.state.subjects ?? {})) {
      if (count > 0 && subject.startsWith(prefix)) ids.add(subject.slice(prefix.length));
    }
    return ids;
  }

  async #stopLoop(source: JobSource, id: string): Promise<void> {
    const loop = source.loops.get(id);
    if (!loop) return;
    source.loops.delete(id);
    await loop.stop();
    this.#o.metrics.webhookJobsWaiting.remove({ webhook: id });
  }

  /**
   * Starts a loop for each of `ids` that has none on this replica. A loop whose durable could
   * not be ensured never runs (nor is ever ready): dropped, so the next sync tries again; the
   * others are still started.
   */
  async #startLoops(source: JobSource, ids: Set<string>): Promise<void> {
    let failed: Error | undefined;
    for (const id of ids) {
      if (source.loops.has(id) || this.#stopping) continue;
      const loop = this.#o.loop(source, id);
      source.loops.set(id, loop);
      try {
        await loop.start();
      } catch (err) {
        source.loops.delete(id);
        failed ??= err instanceof Error ? err : new Error(errorMessage(err));
      }
    }
    if (failed !== undefined) throw failed;
  }
}
