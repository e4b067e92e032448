import { jetstreamManager } from '@nats-io/jetstream';
import { expect } from 'vitest';
import { infraTest as test } from './fixtures.js';

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
