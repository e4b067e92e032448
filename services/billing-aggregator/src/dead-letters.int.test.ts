import { deadLetterStream } from '@holdfast/events';
import { ensureEventsStream, readDeadLetters } from '@holdfast/runtime';
import { waitFor } from '@holdfast/testkit';
import { jetstreamManager } from '@nats-io/jetstream';
import { expect } from 'vitest';
import { aggregatorTest as test } from '../test/fixture.js';
import { publishEvents, publishRaw, settledCall } from '../test/events.js';
import { aggregatorConfig, countEvents, eventsCounter, silent } from '../test/harness.js';
import { startAggregator } from './index.js';

test('with the dead-letter stream gone a poison event is kept (nak-ed, not terminated), valid ones land, and it is parked once the stream is back', async ({
  nc,
  infra,
  ch,
  iso,
}) => {
  const agg = await startAggregator({ config: aggregatorConfig(infra), logger: silent });
  try {
    const jsm = await jetstreamManager(nc);
    const dead = deadLetterStream(iso.names).name;
    await jsm.streams.delete(dead);
    await publishRaw(nc, iso.names, 'batch-summariser.reservation.settled', '{not json');
    await publishEvents(nc, iso.names, settledCall());
    await waitFor(
      async () =>
        (await countEvents(ch, iso.database)) === 2 &&
        (await eventsCounter(agg.registry, 'nacked')) >= 1,
      { what: 'the valid events inserted and the poison one handed back' },
    );
    const consumer = await jsm.consumers.info(iso.names.eventsStream, 'billing-aggregator');
    expect(consumer.num_ack_pending + consumer.num_pending).toBeGreaterThanOrEqual(1);
    expect(await eventsCounter(agg.registry, 'dead_lettered')).toBe(0);

    await ensureEventsStream(jsm, iso.names);
    await waitFor(async () => (await eventsCounter(agg.registry, 'dead_lettered')) === 1, {
      timeoutMs: 20_000,
      what: 'parked once the stream is back',
    });
    const [letter] = await readDeadLetters(jsm, dead);
    expect(letter).toMatchObject({ reason: 'event is not valid JSON', streamSeq: 1 });
    expect(letter!.deliveryCount).toBeGreaterThanOrEqual(2);
    await waitFor(
      async () =>
        (await jsm.consumers.info(iso.names.eventsStream, 'billing-aggregator')).num_ack_pending ===
        0,
      { what: 'nothing left unacked' },
    );
  } finally {
    await agg.stop();
  }
});
