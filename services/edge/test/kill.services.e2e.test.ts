import { setTimeout as sleep } from 'node:timers/promises';
import { infraTest as test } from '@holdfast/testkit';
import { expect } from 'vitest';
import { testClickHouse } from './books.js';
import { BEHAVIOUR, consumersCaughtUp, readBooks, streamedLoad } from './kill-load.js';
import { startProcessStack, type ServiceName } from './processes.js';

/**
 * Every process on its own, 16 workers of streamed calls, kill -9 of one service, restarted
 * 2 s later. Nothing is lost and nothing counted twice: what the mock upstream billed = the
 * authority's ledger = ClickHouse, to the token and the micro-dollar, and the aggregator and
 * the alerter consumed every event.
 */
const VICTIMS: ServiceName[] = ['authority', 'aggregator', 'alerter'];
for (const victim of VICTIMS) {
  test(`kill -9 of the ${victim} under load, restarted 2 s later: the mock's bill = ledger = ClickHouse`, async ({
    natsUrl,
    redisUrl,
    clickhouseUrl,
    clickhouse,
    iso,
  }) => {
    void clickhouse; // the test's database is dropped afterwards
    const s = await startProcessStack({
      natsUrl,
      redisUrl,
      clickhouseUrl,
      iso,
      behaviour: BEHAVIOUR,
      // Shorter than the authority's absence: holds expire meanwhile (billed at their worst
      // case), and the settles and releases that come late must correct that exactly.
      leaseMs: victim === 'authority' ? 2_000 : 6_000,
    });
    const ch = testClickHouse(clickhouseUrl);
    try {
      const load = streamedLoad(s.edgeUrl, 16);
      await load.served(80);
      const inFlight = load.stats.inFlight;
      await s.kill(victim);
      await sleep(2_000);
      await s.restart(victim);
      await load.served(80);
      const stats = await load.stop();
      const books = await readBooks(s, ch, iso.database);
      await consumersCaughtUp(s, iso.names);
      console.log(
        `[kill -9 ${victim}] ${inFlight} in flight at the kill; served ${stats.served}, failed closed ${stats.failedClosed}; books ${JSON.stringify(books)}`,
      );
      expect(stats.other).toEqual([]);
      expect(stats.cut).toBe(0);
      // Only the authority's absence refuses calls (503, fail closed); the others are off the path.
      if (victim !== 'authority') expect(stats.failedClosed).toBe(0);
      expect(books.ledger).toEqual(books.provider);
      expect(books.clickhouse).toEqual(books.ledger);
    } finally {
      await ch.close();
      await s.stop();
    }
  });
}
