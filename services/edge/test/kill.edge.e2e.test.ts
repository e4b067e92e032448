import { setTimeout as sleep } from 'node:timers/promises';
import { infraTest as test } from '@holdfast/testkit';
import { expect } from 'vitest';
import { testClickHouse } from './books.js';
import { BEHAVIOUR, consumersCaughtUp, readBooks, streamedLoad } from './kill-load.js';
import { CAP, startProcessStack } from './processes.js';

/**
 * kill -9 of the edge mid-stream, under 16 workers of streamed calls. Nobody can tell what the
 * model billed for the calls it had in flight, so their holds expire and reserve bills each at
 * its worst case (onExpiry: bill). Once those leases have passed the books never show less
 * than the model billed, and more by no more than the worst cases of the calls that were cut.
 */
test('kill -9 of the edge mid-stream: ledger and ClickHouse at or above the mock bill, by at most the worst cases in flight', async ({
  natsUrl,
  redisUrl,
  clickhouseUrl,
  clickhouse,
  iso,
}) => {
  void clickhouse;
  const s = await startProcessStack({
    natsUrl,
    redisUrl,
    clickhouseUrl,
    iso,
    behaviour: BEHAVIOUR,
    leaseMs: 3_000,
  });
  const ch = testClickHouse(clickhouseUrl);
  try {
    const load = streamedLoad(s.edgeUrl, 16);
    await load.served(80);
    const inFlight = load.stats.inFlight;
    await s.kill('edge');
    const cut = await load.stop();
    expect(cut.cut).toBeGreaterThan(0);
    await sleep(2_000);
    await s.restart('edge');
    // The restarted edge serves again, and settles what it serves exactly.
    const again = streamedLoad(s.edgeUrl, 16);
    await again.served(40);
    const after = await again.stop();
    expect(after.other).toEqual([]);
    expect(after.cut + after.failedClosed).toBe(0);

    const books = await readBooks(s, ch, iso.database);
    await consumersCaughtUp(s, iso.names);
    const worstCases = inFlight * (books.maxPrompt + CAP);
    const over = books.ledger.tokens - books.provider.tokens;
    console.log(
      `[kill -9 edge] ${inFlight} calls in flight (worst cases ${worstCases} tokens), ${cut.cut} cut; the books over the mock bill by ${over} tokens; ${JSON.stringify(books)}`,
    );
    expect(cut.other).toEqual([]);
    expect(over).toBeGreaterThanOrEqual(0);
    expect(over).toBeLessThanOrEqual(worstCases);
    expect(books.ledger.microUsd).toBeGreaterThanOrEqual(books.provider.microUsd);
    expect(books.clickhouse).toEqual(books.ledger);
  } finally {
    await ch.close();
    await s.stop();
  }
});
