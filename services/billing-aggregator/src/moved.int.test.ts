import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { aggregatorTest as test } from '../test/fixture.js';
import { moved, publishEvents, retried, settledCall } from '../test/events.js';
import { aggregatorConfig, countEvents, eventsCounter, silent } from '../test/harness.js';
import { startAggregator } from './index.js';
import { qualified, sql } from './sql.js';

/**
 * `reservation.moved` (a call gone on to a fallback upstream) and `reservation.retried` (a
 * retry's request of its upstream) are types added to v1 after the others: the aggregator
 * inserts them as any event (the upstream in `upstream`, the rest in `extra`), never
 * dead-letters them, and they change no usage.
 */
test('a move to a fallback and a retry are inserted with their upstream, not dead-lettered, and bill nothing', async ({
  infra,
  nc,
  ch,
  iso,
}) => {
  const agg = await startAggregator({ config: aggregatorConfig(infra), logger: silent });
  try {
    const [created, settled] = settledCall();
    await publishEvents(nc, iso.names, [created, retried(created), moved(created), settled]);
    await waitFor(async () => (await countEvents(ch, iso.database)) === 4, {
      what: 'the four events inserted',
    });
    const t = qualified(iso.database, 'events_raw_v1');
    const rows = await ch.query<{ type: string; upstream: string; extra: string; b: string }>(
      sql`SELECT type, upstream, extra, toString(billed_tokens) AS b FROM ${t} FINAL WHERE type IN ('reservation.moved', 'reservation.retried') ORDER BY type`,
    );
    expect(rows.map((r) => ({ ...r, extra: r.extra && (JSON.parse(r.extra) as unknown) }))).toEqual(
      [
        {
          type: 'reservation.moved',
          upstream: 'backup',
          extra: { fromUpstream: 'default', tokens: 1_394, fromUsedTokens: 120 },
          b: '0',
        },
        // Nothing past its columns: no extra.
        { type: 'reservation.retried', upstream: 'default', extra: '', b: '0' },
      ],
    );
    expect(await eventsCounter(agg.registry, 'dead_lettered')).toBe(0);
  } finally {
    await agg.stop();
  }
});
