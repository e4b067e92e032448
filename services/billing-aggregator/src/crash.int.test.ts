import { startService, waitFor } from '@holdfast/testkit';
import { aggregatorTest as test } from '../test/fixture.js';
import { jetstreamManager } from '@nats-io/jetstream';
import { expect } from 'vitest';
import { publishEvents } from '../test/events.js';
import { aggregatorEnv, callsBilling, countEvents, MAIN_JS, viewTokens } from '../test/harness.js';

test('kill -9 with a batch delivered but not yet inserted: after a restart, 0 lost and 0 counted twice', async ({
  nc,
  infra,
  ch,
  iso,
}) => {
  const common = {
    BILLING_AGGREGATOR_BATCH_SIZE: '1000',
    BILLING_AGGREGATOR_FETCH_SIZE: '500',
  };
  // Only full batches flush: the tail of the backlog waits in memory, delivered and unacked,
  // for as long as the test needs on a busy box (with a 3 s ack wait, the tail came back
  // while the first two batches were still going in, filled the third and was inserted).
  const first = await startService(
    MAIN_JS,
    aggregatorEnv(infra, {
      ...common,
      BILLING_AGGREGATOR_FLUSH_INTERVAL_MS: '600000',
      BILLING_AGGREGATOR_ACK_WAIT_MS: '600000',
    }),
  );
  const jsm = await jetstreamManager(nc);
  try {
    const before = callsBilling(1_250); // 2,500 events: two full batches and 500 waiting
    await publishEvents(nc, iso.names, before.events);
    await waitFor(async () => (await countEvents(ch, iso.database)) === 2_000, {
      timeoutMs: 20_000,
      what: 'two full batches inserted',
    });
    await waitFor(
      async () =>
        (await jsm.consumers.info(iso.names.eventsStream, 'billing-aggregator')).num_ack_pending ===
        500,
      { what: 'the third batch delivered and waiting' },
    );
    await first.crash();
    // The 500 were delivered to the dead process and never inserted: only a redelivery saves them.
    expect(await countEvents(ch, iso.database)).toBe(2_000);

    const after = callsBilling(1_250, 'support-bot');
    await publishEvents(nc, iso.names, after.events);
    const second = await startService(
      MAIN_JS,
      // The replica brings the durable to its 3 s ack wait: the dead one's tail comes back.
      aggregatorEnv(infra, {
        ...common,
        BILLING_AGGREGATOR_FLUSH_INTERVAL_MS: '200',
        BILLING_AGGREGATOR_ACK_WAIT_MS: '3000',
      }),
    );
    try {
      const total = before.events.length + after.events.length;
      await waitFor(async () => (await countEvents(ch, iso.database)) === total, {
        timeoutMs: 30_000,
        what: `all ${total} events`,
      });
      await waitFor(
        async () => (await viewTokens(ch, iso.database)) === before.billed + after.billed,
        {
          what: 'every settled call billed once',
        },
      );
      expect(await countEvents(ch, iso.database)).toBe(total);
    } finally {
      await second.stop();
    }
  } finally {
    await first.stop();
  }
});
