import { deadLetterSubject, parseEvent, type NatsNames } from '@holdfast/events';
import { errorMessage } from '@holdfast/runtime';
import type { JsMsg } from '@nats-io/jetstream';
import { headers, type NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '@holdfast/runtime';
import type { HealthGate } from './health-gate.js';
import type { AggregatorMetrics } from './metrics.js';
import { RowBinaryEncoder } from './rowbinary.js';
import { rowProblem, toEventRow, writeEventRow } from './rows.js';
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

export const CONSUMER_NAME = 'billing-aggregator';

/** Headers on a dead-lettered message (its data is the original bytes). */
export const DEAD_LETTER_HEADERS = {
  reason: 'Holdfast-Dead-Letter-Reason',
  subject: 'Holdfast-Original-Subject',
  streamSeq: 'Holdfast-Stream-Seq',
} as const;

/** Redelivery delay after a failed insert: 500 ms doubling per delivery, at most 10 s. */
export function nakDelayMs(deliveryCount: number): number {
  return Math.min(500 * 2 ** Math.max(0, Math.min(deliveryCount - 1, 10)), 10_000);
}

export interface EventSinkOptions {
  nc: NatsConnection;
  names: NatsNames;
  writer: EventsWriter;
  gate: HealthGate;
  metrics: AggregatorMetrics;
  logger: Logger;
  /** The consumer's ack wait; long inserts send `working()` at a third of it. */
  ackWaitMs: number;
}

/**
 * From JetStream message to ClickHouse row, and the ordered commit of a batch:
 * 1. insert (ClickHouse confirmed it), 2. ack (JetStream may forget the message).
 * A crash between 1 and 2 redelivers messages whose rows are already stored; the second
 * insert collapses into the first (events_raw_v1 is keyed by event id, read with FINAL), so
 * there is no third step marking dedupe keys: the table key is the mark.
 */
export class EventSink {
  readonly #o: EventSinkOptions;
  readonly #deadLetter: string;
  readonly #encoder = new RowBinaryEncoder();

  constructor(opts: EventSinkOptions) {
    this.#o = opts;
    this.#deadLetter = deadLetterSubject(opts.names, CONSUMER_NAME);
  }

  /** Parses a message. A poison message is dead-lettered here and `undefined` returned. */
  accept(msg: JsMsg): Pending | undefined {
    const parsed = parseEvent(msg.data);
    if (!parsed.ok) {
      this.deadLetter(msg, parsed.error);
      return undefined;
    }
    const row = toEventRow(parsed.event, msg.seq);
    const problem = rowProblem(row);
    if (problem !== undefined) {
      this.deadLetter(msg, `row does not fit events_raw_v1: ${problem}`);
      return undefined;
    }
    return { msg, id: row.id, timeMs: row.time_ms, bytes: writeEventRow(this.#encoder, row) };
  }

  /** Publishes the message to the dead-letter subject, logs it, then terminates it. */
  deadLetter(msg: JsMsg, reason: string): void {
    const h = headers();
    h.set(DEAD_LETTER_HEADERS.reason, reason.replace(/[\r\n]+/g, ' ').slice(0, 1_000));
    h.set(DEAD_LETTER_HEADERS.subject, msg.subject);
    h.set(DEAD_LETTER_HEADERS.streamSeq, String(msg.seq));
    this.#o.nc.publish(this.#deadLetter, msg.data, { headers: h });
    this.#o.logger.error(
      { streamSeq: msg.seq, subject: msg.subject, reason, deadLetter: this.#deadLetter },
      'poison message dead-lettered',
    );
    // No reason argument: nats-server 2.9 does not parse `+TERM <reason>` and would leave it pending.
    msg.term();
    this.#o.metrics.events.inc({ outcome: 'dead_lettered' });
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

    const outcome = await this.#withWorking(batch, () => this.#o.writer.write(rows));
    if (!outcome.ok) {
      // Transient: hand every message back with a delay and pause until ClickHouse answers.
      for (const p of batch) p.msg.nak(nakDelayMs(p.msg.info.deliveryCount));
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
    const rejected = new Map(outcome.rejected.map((r) => [r.index, r.error]));
    let newestMs = 0;
    groups.forEach((group, i) => {
      const error = rejected.get(i);
      for (const p of group) {
        if (error !== undefined) this.deadLetter(p.msg, `ClickHouse rejected the row: ${error}`);
        else p.msg.ack();
      }
      if (error === undefined) newestMs = Math.max(newestMs, group[0]!.timeMs);
    });
    const inserted = rows.length - rejected.size;
    metrics.events.inc({ outcome: 'inserted' }, inserted);
    metrics.events.inc({ outcome: 'duplicate_in_batch' }, batch.length - rows.length);
    metrics.batchSize.observe(rows.length);
    metrics.flushSeconds.observe((performance.now() - started) / 1000);
    if (newestMs > 0) metrics.eventLagSeconds.set(Math.max(0, (Date.now() - newestMs) / 1000));
    metrics.clickhouseUp.set(1);
    logger.debug({ inserted, rejected: rejected.size }, 'batch flushed');
  }

  /** Runs `work`, telling JetStream the batch is in progress if it takes long. */
  async #withWorking<T>(batch: Pending[], work: () => Promise<T>): Promise<T> {
    const timer = setInterval(
      () => {
        for (const p of batch) p.msg.working();
      },
      Math.max(500, Math.floor(this.#o.ackWaitMs / 3)),
    );
    try {
      return await work();
    } catch (err) {
      this.#o.logger.error({ err: errorMessage(err) }, 'writer threw');
      throw err;
    } finally {
      clearInterval(timer);
    }
  }
}
