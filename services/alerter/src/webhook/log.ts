import { deadLetterHeaders, IsoTime, PlainId } from '@holdfast/events';
import type { JetStreamClient, JsMsg } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import { z } from 'zod';
import type { AlerterNames } from '../env.js';
import { DELIVERY_OUTCOMES } from '../metrics.js';

/**
 * The delivery log: one record per attempt on `<prefix>.webhooks.log.<webhook>`, and one
 * dead-letter record (with the whole job, so an operator can re-queue it) on
 * `<prefix>.webhooks.dead.<webhook>`, both kept in the `<TOKEN>_WEBHOOK_LOG` stream (30 days).
 * A dead-letter record carries the dead-letter headers (packages/events) like every other
 * dead letter; it stays beside the delivery's attempts because the event was fine and only
 * the receiver failed (docs/events.md, "Dead letters").
 * A NATS stream rather than a ClickHouse table: the alerter already depends on NATS only,
 * the aggregator owns the ClickHouse schema, and `nats sub 'holdfast.webhooks.>'` shows it live.
 */
export const DeliveryLogRecord = z.object({
  time: IsoTime,
  /** The webhook-id header: the event id. */
  deliveryId: z.string(),
  webhookId: PlainId,
  eventType: z.string(),
  tenant: z.string(),
  attempt: z.int().min(1),
  outcome: z.enum(DELIVERY_OUTCOMES),
  /** HTTP status of the receiver's answer; null when none came. */
  status: z.int().nullable(),
  error: z.string().nullable(),
  durationMs: z.number().min(0),
  /** From the event's time to this attempt's end. */
  latencyMs: z.number(),
  nextAttemptAt: IsoTime.nullable(),
});
export type DeliveryLogRecord = z.infer<typeof DeliveryLogRecord>;

export const DeadLetterRecord = DeliveryLogRecord.extend({
  reason: z.string(),
  job: z.unknown(),
});
export type DeadLetterRecord = z.infer<typeof DeadLetterRecord>;

export class DeliveryLog {
  readonly #js: JetStreamClient;
  readonly #names: AlerterNames;

  constructor(opts: { js: JetStreamClient; names: AlerterNames }) {
    this.#js = opts.js;
    this.#names = opts.names;
  }

  async attempt(record: DeliveryLogRecord): Promise<void> {
    const r = DeliveryLogRecord.parse(record);
    await this.#js.publish(`${this.#names.logSubjectPrefix}.${r.webhookId}`, JSON.stringify(r));
  }

  /** Stores the record of a delivery given up, with the queue message it came from. */
  async deadLetter(record: DeadLetterRecord, job: JsMsg): Promise<void> {
    const r = DeadLetterRecord.parse(record);
    const h = headers();
    const info = {
      reason: r.reason,
      service: 'alerter',
      subject: job.subject,
      stream: job.info.stream,
      streamSeq: job.seq,
      deliveryCount: job.info.deliveryCount,
    };
    for (const [name, value] of deadLetterHeaders(info)) h.set(name, value);
    await this.#js.publish(`${this.#names.deadSubjectPrefix}.${r.webhookId}`, JSON.stringify(r), {
      msgID: `dead.${r.deliveryId}.${r.webhookId}`,
      headers: h,
    });
  }
}
