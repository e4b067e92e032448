import { Err, Ok } from '@holdfast/runtime';
import { expect, test } from 'vitest';
import { RecentCounts, type CountReply } from './counting.js';

test('a count answers the same request for its minute, shared while it runs; a failure is not kept; the oldest goes first', async () => {
  const recent = new RecentCounts(60_000, 2);
  let asked = 0;
  const count = (reply: CountReply) => () => {
    asked++;
    return Promise.resolve(reply);
  };
  const together = [recent.get('a', count(Ok(7)), 0), recent.get('a', count(Ok(8)), 1)];
  expect(await Promise.all(together)).toEqual([Ok(7), Ok(7)]);
  expect(await recent.get('a', count(Ok(9)), 59_999)).toEqual(Ok(7));
  expect(await recent.get('a', count(Ok(9)), 60_000)).toEqual(Ok(9));
  expect(asked).toBe(2);

  const failed = Err({ code: 'count_busy' as const, status: null, message: 'busy' });
  expect(await recent.get('b', count(failed), 0)).toEqual(failed);
  expect(await recent.get('b', count(Ok(3)), 1)).toEqual(Ok(3));
  expect(asked).toBe(4);

  // Two kept at most: a third drops the oldest ('a').
  await recent.get('c', count(Ok(5)), 2);
  expect(await recent.get('a', count(Ok(10)), 3)).toEqual(Ok(10));
  expect(asked).toBe(6);
});
