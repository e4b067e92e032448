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
import type { AlerterNames, AlerterSettings } from '../env.js';
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
/** A job is kept this long past its last retry and that attempt's ack wait. */
const QUEUE_MAX_AGE_MARGIN_MS = 3_600_000;

/**
 * A job's ack wait: longer than one attempt and a wait for a slot, so a slow receiver is not
 * sent the same job twice at once.
 */
export function webhookAckWaitMs(settings: Pick<AlerterSettings, 'webhookTimeoutMs'>): number {
  return settings.webhookTimeoutMs + 30_000;
}

/**
 * How long the queue keeps a job: its whole retry period, the ack wait of its last attempt
 * and an hour for deliverers that were all down. An older job is gone without a record.
 */
function webhookQueueMaxAgeMs(
  settings: Pick<AlerterSettings, 'webhookTimeoutMs' | 'retry'>,
): number {
  return settings.retry.retryForMs + webhookAckWaitMs(settings) + QUEUE_MAX_AGE_MARGIN_MS;
}

/**
 * The delivery queue and the delivery log. The queue has limits retention, not a work queue's:
 * an ack deletes nothing. On nats-server 2.9 the ack of a job delivered twice (its first ack
 * died with a killed consumer leader) made a work queue delete a message one replica no longer
 * had, and that replica reset its clustered state ("stream store EOF", nats-server#7308,
 * fixed upstream by #7348): the queue took no job for 10-46 s, and once lost one. Delivered
 * jobs are purged up to their consumer's ack floor (purge.ts), a removed webhook's when its
 * consumer goes (consumers.ts), and the rest leave by age (`webhookQueueMaxAgeMs`). Existing streams keep what an operator set, as the events stream does.
 */
export async function ensureWebhookStreams(
  jsm: JetStreamManager,
  names: AlerterNames,
  settings: Pick<AlerterSettings, 'webhookTimeoutMs' | 'retry'>,
  opts: StreamOptions = {},
) {
  const common = { storage: StorageType.File, num_replicas: opts.replicas ?? 1 };
  const maxAge = nanos(webhookQueueMaxAgeMs(settings));
  await ensureStream(
    jsm,
    {
      ...common,
      name: names.webhookStream,
      subjects: [`${names.webhookSubjectPrefix}.>`],
      retention: RetentionPolicy.Limits,
      max_age: maxAge,
      duplicate_window: nanos(QUEUE_DUPLICATE_WINDOW_MS),
    },
    opts.logger,
  );
  // A queue made before the retry period was raised would drop jobs still being retried.
  const kept = (await jsm.streams.info(names.webhookStream)).config.max_age;
  if (kept !== 0 && kept < maxAge) {
    opts.logger?.warn(
      { stream: names.webhookStream, maxAgeMs: kept / 1e6, neededMs: maxAge / 1e6 },
      'webhook queue drops jobs before their retry period ends: raise its max_age',
    );
  }
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

  /** Whether some webhook of the current config wants this event's type. */
  wants(event: Pick<HoldfastEvent, 'type'>): boolean {
    return this.#config.current.raw.webhooks.some((w) => w.events.includes(event.type));
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
