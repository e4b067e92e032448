import { jetstreamManager } from '@nats-io/jetstream';
import { expect } from 'vitest';
import { infraTest as test } from './fixtures.js';
import { waitFor } from './wait-for.js';

test('the resolved NATS has JetStream, Redis answers, ClickHouse gets a private database', async ({
  nc,
  redis,
  clickhouse,
  iso,
}) => {
  const jsm = await jetstreamManager(nc);
  expect((await jsm.getAccountInfo()).limits).toBeDefined();
  await redis.set(`${iso.keyPrefix}:probe`, '1');
  expect(await redis.get(`${iso.keyPrefix}:probe`)).toBe('1');
  const rs = await clickhouse.query({
    query: 'SELECT currentDatabase() AS db',
    format: 'JSONEachRow',
  });
  expect(await rs.json()).toEqual([{ db: iso.database }]);
});

/**
 * Every insert makes a part, and every merge leaves the parts it merged on disk for
 * `old_parts_lifetime` (8 minutes by default); dropping the database removes all of their
 * files, ~90 a part of a 40-column table. After 300 small inserts (the aggregator's batches)
 * events_raw_v1 had 351 such parts and 8 live ones: its DROP took 18.4 s on a loaded box, and
 * past the client's 30 s in CI's teardown. The test server removes them within seconds.
 */
test('the parts a merge replaced are removed within seconds, so a test database drops fast', async ({
  clickhouse,
  iso,
}) => {
  const columns = Array.from({ length: 40 }, (_, i) => `c${i} UInt64`).join(', ');
  await clickhouse.command({
    query: `CREATE TABLE wide (id String, ${columns}) ENGINE = ReplacingMergeTree ORDER BY id`,
  });
  for (let i = 0; i < 40; i++) {
    await clickhouse.command({
      query: `INSERT INTO wide (id) SELECT toString(number + ${i * 10}) FROM numbers(10)`,
    });
  }
  const parts = async () => {
    const rs = await clickhouse.query({
      query: `SELECT active, count() AS n FROM system.parts WHERE database = '${iso.database}' AND table = 'wide' GROUP BY active`,
      format: 'JSONEachRow',
    });
    const rows = await rs.json<{ active: number; n: string }>();
    return Object.fromEntries(rows.map((x) => [x.active ? 'live' : 'replaced', Number(x.n)]));
  };
  const after = await parts();
  await waitFor(async () => ((await parts()).replaced ?? 0) === 0, {
    timeoutMs: 20_000,
    what: `the replaced parts of 40 inserts removed (${JSON.stringify(after)} after the inserts)`,
  });
});
