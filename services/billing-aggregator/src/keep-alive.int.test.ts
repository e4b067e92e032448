import { httpProxy, waitFor, type HttpProxy } from '@holdfast/testkit';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { expect } from 'vitest';
import { aggregatorTest as test, type AggregatorInfra } from '../test/fixture.js';
import { publishEvents } from '../test/events.js';
import {
  aggregatorConfig,
  callsBilling,
  countEvents,
  eventsCounter,
  silent,
} from '../test/harness.js';
import type { SqlExecutor } from './clickhouse.js';
import { startAggregator } from './index.js';

/**
 * An ack wait far below how long the batcher holds events; 1.5 s is the least where a batch
 * younger than the keep-alive period (500 ms) is skipped, as under the default 30 s.
 */
const ACK_WAIT_MS = '1500';

/**
 * ClickHouse behind a proxy that, once `arm()`ed, holds each insert into events_raw_v1 for
 * `delayMs` before passing it on (a slow ClickHouse); everything else goes through at once.
 * `slowed()`: how many inserts it held.
 */
async function slowInserts(
  target: string,
  delayMs: number,
): Promise<HttpProxy & { arm: () => void; slowed: () => number }> {
  let armed = false;
  let slowed = 0;
  const proxy = await httpProxy((req) => {
    // The client sends an insert's query in the URL, form-encoded (`INSERT+INTO+...`).
    const query = new URL(req.url ?? '/', 'http://proxy').searchParams.get('query') ?? '';
    const slow = armed && /^INSERT INTO \S*events_raw_v1\b/i.test(query);
    if (slow) slowed += 1;
    return { target, delayMs: slow ? delayMs : 0 };
  });
  return { ...proxy, arm: () => void (armed = true), slowed: () => slowed };
}

/**
 * Publishes `calls` calls to an aggregator with `overrides`, waits until every event is
 * inserted, and returns how often the durable delivered (a redelivery counts again).
 * `warmed` runs between the warm-up call and the measured ones.
 */
async function deliveries(
  t: { nc: NatsConnection; infra: AggregatorInfra; ch: SqlExecutor },
  overrides: Record<string, string>,
  calls: number,
  warmed: () => void = () => undefined,
): Promise<{ events: number; delivered: number; rows: number; inserted: number }> {
  const { nc, infra, ch } = t;
  const agg = await startAggregator({
    config: aggregatorConfig(infra, { BILLING_AGGREGATOR_ACK_WAIT_MS: ACK_WAIT_MS, ...overrides }),
    logger: silent,
  });
  try {
    const jsm = await jetstreamManager(nc);
    const info = () => jsm.consumers.info(infra.names.eventsStream, 'billing-aggregator');
    const landed = async (n: number) =>
      waitFor(
        async () =>
          (await countEvents(ch, infra.database)) === n && (await info()).num_ack_pending === 0,
        { timeoutMs: 30_000, what: `all ${n} events inserted and acked` },
      );
    // One call first, so the cold start (the event schemas compiled on the first parse: seconds
    // on a loaded box, the ack wait's length) is behind us. A warm-up message redelivered then
    // would be acked with its first copy and inserted again after, among the measured calls.
    const warm = callsBilling(1).events;
    await publishEvents(nc, infra.names, warm);
    await landed(warm.length);
    warmed();
    const before = (await info()).delivered.consumer_seq;
    const inserted = await eventsCounter(agg.registry, 'inserted');

    const { events } = callsBilling(calls);
    await publishEvents(nc, infra.names, events);
    await landed(warm.length + events.length);
    return {
      events: events.length,
      delivered: (await info()).delivered.consumer_seq - before,
      rows: (await countEvents(ch, infra.database, false)) - warm.length,
      inserted: (await eventsCounter(agg.registry, 'inserted')) - inserted,
    };
  } finally {
    await agg.stop();
  }
}

test('a batch filling for 3.5 s under a 1.5 s ack wait is delivered once and inserted once', async ({
  nc,
  infra,
  ch,
}) => {
  const got = await deliveries(
    { nc, infra, ch },
    { BILLING_AGGREGATOR_FLUSH_INTERVAL_MS: '3500', BILLING_AGGREGATOR_BATCH_SIZE: '10000' },
    20,
  );
  expect(got).toEqual({ events: 40, delivered: 40, rows: 40, inserted: 40 });
});

test('a full batch waiting 3 s behind a slow insert, under a 1.5 s ack wait, is delivered once and inserted once', async ({
  nc,
  infra,
  ch,
}) => {
  const proxy = await slowInserts(infra.clickhouseUrl, 3_000);
  try {
    const got = await deliveries(
      { nc, infra: { ...infra, clickhouseUrl: proxy.url }, ch },
      {
        BILLING_AGGREGATOR_BATCH_SIZE: '20',
        BILLING_AGGREGATOR_FETCH_SIZE: '20',
        BILLING_AGGREGATOR_FLUSH_INTERVAL_MS: '100',
      },
      30,
      // Slow after the warm-up: a cold start as long as the ack wait, then a 3 s insert, would
      // have the warm-up redelivered whatever the keep-alive does.
      () => proxy.arm(),
    );
    expect(got).toEqual({ events: 60, delivered: 60, rows: 60, inserted: 60 });
    // The scenario happened: inserts were held past the ack wait.
    expect(proxy.slowed()).toBeGreaterThan(0);
  } finally {
    await proxy.close();
  }
});
