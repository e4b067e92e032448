import { parseEvent } from '@holdfast/events';
import { errorMessage, nakLater, streamSequence, type DeadLetters } from '@holdfast/runtime';
import type { JsMsg } from '@nats-io/jetstream';
import type { Logger } from '@holdfast/runtime';
import { REDELIVER } from './consumer.js';
import type { HealthGate } from './health-gate.js';
import type { AggregatorMetrics } from './metrics.js';
import { RowBinaryEncoder } from './rowbinary.js';
import { encodeEventRow } from './event-row.js';
import type { EventsWriter } from './writer.js';

/** A message that parsed into a row and waits in a batch. */
export interface Pending {
  msg: JsMsg;
  /** The event id (a batch may hold the same event twice). */
  id: string;
  /** The event's time, ms since epoch (the lag metric). */
  timeMs: number;
  /** The row of events_raw_v1, RowBinary-encoded. */
  bytes: Uint8Array;
}

/** The dead letters' source: `holdfast.deadletter.billing-aggregator`. */
export const CONSUMER_NAME = 'billing-aggregator';

export interface BatchCommitOptions {
  deadLetters: DeadLetters;
  writer: EventsWriter;
  gate: HealthGate;
  metrics: AggregatorMetrics;
  logger: Logger;
  /** The consumer's ack wait (a nak is resent until a leader takes it, at most this long). */
  ackWaitMs: number;
}

/**
 * From JetStream message to ClickHouse row, and the ordered commit of a batch:
 * 1. insert (ClickHouse confirmed it), 2. ack (JetStream may forget the message).
 * A crash between 1 and 2 redelivers messages whose rows are already stored; the second
 * insert collapses into the first (events_raw_v1 is keyed by event id, read with FINAL), so
 * there is no third step marking dedupe keys: the table key is the mark.
 */
export class BatchCommit {
  readonly #o: BatchCommitOptions;
  readonly #encoder = new RowBinaryEncoder();

  constructor(opts: BatchCommitOptions) {
    this.#o = opts;
  }

  /**
   * Parses a message into a row for the batch. A poison message is dead-lettered instead: the
   * promise returned then is the consume loop's to wait for (poison is rare, order is kept).
   */
  accept(msg: JsMsg): Pending | Promise<void> {
    const parsed = parseEvent(msg.data);
    if (!parsed.ok) return this.#deadLetter(msg, parsed.error.message);
    const e = parsed.value;
    const timeMs = Date.parse(e.time);
    const bytes = encodeEventRow(this.#encoder, e, timeMs, streamSequence(msg), Date.now());
    if (typeof bytes === 'string') {
      return this.#deadLetter(msg, `row does not fit events_raw_v1: ${bytes}`);
    }
    return { msg, id: e.id, timeMs, bytes };
  }

  /** The dead letter, stored, then the term; or a nak when it could not be stored. */
  async #deadLetter(msg: JsMsg, reason: string): Promise<void> {
    const parked = await this.#o.deadLetters.term(msg, reason);
    this.#o.metrics.events.inc({ outcome: parked ? 'dead_lettered' : 'nacked' });
  }

  async flush(batch: Pending[]): Promise<void> {
    const { metrics, logger } = this.#o;
    const started = performance.now();
    // The same event may sit twice in one batch (redelivered while its first copy waited).
    const byId = new Map<string, Pending[]>();
    for (const p of batch) {
      const same = byId.get(p.id);
      if (same) same.push(p);
      else byId.set(p.id, [p]);
    }
    const groups = [...byId.values()];
    const rows = groups.map((g) => g[0]!.bytes);

    // A long insert does not get the batch redelivered: the consume loop keeps what the
    // batcher holds alive (`working()`), this batch included, until this returns.
    const outcome = await this.#write(rows);
    if (!outcome.ok) {
      // Transient: hand every message back with a delay and pause until ClickHouse answers.
      for (const p of batch) nakLater(p.msg, REDELIVER, this.#o.ackWaitMs);
      metrics.flushFailures.inc();
      metrics.events.inc({ outcome: 'nacked' }, batch.length);
      this.#o.gate.close();
      logger.warn(
        { err: outcome.error, events: batch.length },
        'insert failed: batch handed back to JetStream',
      );
      return;
    }
    // Persisted: now ack. Rejected rows (ClickHouse refused their data) are dead-lettered.
    const rejected = new Map(outcome.value.map((r) => [r.index, r.error]));
    let newestMs = 0;
    const parking: Promise<void>[] = [];
    groups.forEach((group, i) => {
      const error = rejected.get(i);
      for (const p of group) {
        if (error !== undefined) {
          parking.push(this.#deadLetter(p.msg, `ClickHouse rejected the row: ${error}`));
        } else p.msg.ack();
      }
      if (error === undefined) newestMs = Math.max(newestMs, group[0]!.timeMs);
    });
    await Promise.all(parking);
    const inserted = rows.length - rejected.size;
    metrics.events.inc({ outcome: 'inserted' }, inserted);
    metrics.events.inc({ outcome: 'duplicate_in_batch' }, batch.length - rows.length);
    metrics.batchSize.observe(rows.length);
    metrics.flushSeconds.observe((performance.now() - started) / 1000);
    if (newestMs > 0) metrics.eventLagSeconds.set(Math.max(0, (Date.now() - newestMs) / 1000));
    metrics.clickhouseUp.set(1);
    logger.debug({ inserted, rejected: rejected.size }, 'batch flushed');
  }

  async #write(rows: Uint8Array[]): ReturnType<EventsWriter['write']> {
    try {
      return await this.#o.writer.write(rows);
    } catch (err) {
      this.#o.logger.error({ err: errorMessage(err) }, 'writer threw');
      throw err;
    }
  }
}
