import type { NatsConnection, Msg } from '@nats-io/transport-node';
import { request } from 'undici';
import { NAMES } from './protocol.js';

const ACK = new TextEncoder().encode('+ACK');
const decoder = new TextDecoder();

/** The members of a floor event (floor.lua) the consumers read. */
interface FloorEvent {
  id: string;
  type: string;
  time: number;
  tenant: string;
  tokens: number;
  microUsd: number;
  windows: Array<{ budget: string; limit: number; used: number; held: number }>;
}

const parse = (m: Msg) => JSON.parse(decoder.decode(m.data)) as FloorEvent;

/** The ClickHouse table, on 18.16 and current servers (ReplacingMergeTree: a redelivery is one row). */
export const TABLE_DDL = [
  `CREATE DATABASE IF NOT EXISTS ${NAMES.database}`,
  `CREATE TABLE IF NOT EXISTS ${NAMES.database}.events (id String, type String, tenant String, ` +
    `time DateTime, tokens Int64, micro_usd Int64) ENGINE = ReplacingMergeTree() ` +
    `PARTITION BY toYYYYMM(time) ORDER BY (tenant, id)`,
];

/** One JSONEachRow line of an event: every column, time in unix seconds. */
export function row(e: FloorEvent): string {
  return JSON.stringify({
    id: e.id,
    type: e.type,
    tenant: e.tenant,
    time: Math.floor(e.time / 1_000),
    tokens: e.tokens,
    micro_usd: e.microUsd,
  });
}

/** Runs one statement over ClickHouse's HTTP interface; throws on anything but 200. */
export async function clickhouse(url: string, query: string, body?: string): Promise<void> {
  const res = await request(`${url}/?query=${encodeURIComponent(query)}`, {
    method: 'POST',
    body: body ?? '',
  });
  const text = await res.body.text();
  if (res.statusCode !== 200)
    throw new Error(`ClickHouse ${res.statusCode}: ${text.slice(0, 300)}`);
}

/**
 * The floor's billing aggregator: events batched, inserted into ClickHouse every `flushMs` (or
 * sooner when `batchSize` wait), and acked only once the insert answered. A failed insert is
 * not acked: JetStream redelivers it after the ack wait.
 */
export class FloorAggregator {
  #rows: string[] = [];
  #acks: string[] = [];
  #flushing: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly o: {
      nc: NatsConnection;
      clickhouseUrl: string;
      batchSize: number;
      flushMs: number;
    },
  ) {}

  start(): void {
    this.#timer = setInterval(() => void this.flush(), this.o.flushMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.flush();
  }

  take(msgs: Msg[]): void {
    for (const m of msgs) {
      this.#rows.push(row(parse(m)));
      this.#acks.push(m.reply!);
    }
    if (this.#rows.length >= this.o.batchSize) void this.flush();
  }

  async flush(): Promise<void> {
    if (this.#flushing) return this.#flushing;
    if (this.#rows.length === 0) return;
    const rows = this.#rows;
    const acks = this.#acks;
    this.#rows = [];
    this.#acks = [];
    const query = `INSERT INTO ${NAMES.database}.events FORMAT JSONEachRow`;
    this.#flushing = clickhouse(this.o.clickhouseUrl, query, rows.join('\n'))
      .then(
        // Stored: now the events may go (one ack each, written in one turn).
        () => acks.forEach((reply) => this.o.nc.publish(reply, ACK)),
        (err: unknown) => void process.stderr.write(`floor aggregator: ${String(err)}\n`),
      )
      .finally(() => (this.#flushing = undefined));
    return this.#flushing;
  }
}

/** A window at or past `share` of its limit (held included). */
export function over(w: FloorEvent['windows'][number], share: number): boolean {
  return w.used + w.held >= w.limit * share;
}

/**
 * The floor's alerter: parses each event, looks at its windows against the first soft
 * threshold (0.8), and acks it. (It fires nothing: the bench's limits are never near.)
 */
export class FloorAlerter {
  crossings = 0;

  constructor(private readonly nc: NatsConnection) {}

  take(msgs: Msg[]): void {
    for (const m of msgs) {
      for (const w of parse(m).windows) if (over(w, 0.8)) this.crossings++;
      this.nc.publish(m.reply!, ACK);
    }
  }
}
