import { IsoTime, PlainId, type HoldfastEvent } from '@holdfast/events';
import { ensureStream, JETSTREAM_OP_TIMEOUT_MS, type StreamOptions } from '@holdfast/runtime';
import {
  RetentionPolicy,
  StorageType,
  type JetStreamClient,
  type JetStreamManager,
} from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { z } from 'zod';
import type { AlerterNames } from '../env.js';
import type { ConfigSource } from '../holdfast-config.js';

/** One delivery of one event to one webhook. The event is stored whole: retries resend it. */
export const DeliveryJob = z.object({
  webhookId: PlainId,
  event: z
    .record(z.string(), z.unknown())
    .and(z.object({ id: z.string(), type: z.string(), time: IsoTime, tenant: z.string() })),
  enqueuedAt: IsoTime,
});
export type DeliveryJob = z.infer<typeof DeliveryJob>;

/** JetStream remembers a job's msg id this long, so a re-handled event is queued once. */
const QUEUE_DUPLICATE_WINDOW_MS = 10 * 60_000;
const LOG_MAX_AGE_MS = 30 * 86_400_000;

/**
 * The delivery queue (work queue: a job leaves it when acked) and the delivery log. Existing
 * streams keep what an operator set, as the events stream does.
 */
export async function ensureWebhookStreams(
  jsm: JetStreamManager,
  names: AlerterNames,
  opts: StreamOptions = {},
) {
  const common = { storage: StorageType.File, num_replicas: opts.replicas ?? 1 };
  await ensureStream(
    jsm,
    {
      ...common,
      name: names.webhookStream,
      subjects: [`${names.webhookSubjectPrefix}.>`],
      retention: RetentionPolicy.Workqueue,
      duplicate_window: nanos(QUEUE_DUPLICATE_WINDOW_MS),
    },
    opts.logger,
  );
  await ensureStream(
    jsm,
    {
      ...common,
      name: names.logStream,
      subjects: [`${names.logSubjectPrefix}.>`, `${names.deadSubjectPrefix}.>`],
      retention: RetentionPolicy.Limits,
      max_age: nanos(LOG_MAX_AGE_MS),
      duplicate_window: nanos(QUEUE_DUPLICATE_WINDOW_MS),
    },
    opts.logger,
  );
}

/**
 * Puts one job per matching webhook on the queue. Never calls a receiver: delivery happens in
 * the worker, off the path that handles events (and far from the request path).
 */
export class WebhookQueue {
  readonly #js: JetStreamClient;
  readonly #names: AlerterNames;
  readonly #config: ConfigSource;

  constructor(opts: { js: JetStreamClient; names: AlerterNames; config: ConfigSource }) {
    this.#js = opts.js;
    this.#names = opts.names;
    this.#config = opts.config;
  }

  /** Returns how many jobs were queued (0 when no webhook wants this event type). */
  async enqueue(event: HoldfastEvent, nowMs = Date.now()): Promise<number> {
    const hooks = this.#config.current.raw.webhooks.filter((w) => w.events.includes(event.type));
    for (const hook of hooks) {
      const job: DeliveryJob = {
        webhookId: hook.id,
        event,
        enqueuedAt: new Date(nowMs).toISOString(),
      };
      await this.#js.publish(
        `${this.#names.webhookSubjectPrefix}.${hook.id}`,
        JSON.stringify(job),
        { msgID: `${event.id}.${hook.id}`, timeout: JETSTREAM_OP_TIMEOUT_MS },
      );
    }
    return hooks.length;
  }
}
