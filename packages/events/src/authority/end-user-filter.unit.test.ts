import { expect, test } from 'vitest';
import {
  END_USER_FILTER_MAX,
  EndUserFilter,
  endUserFilterOf,
  endUserSet,
  mayTrack,
} from './end-user-filter.js';

test('a filter holds every end user it was built of; a new one rarely (about 0.24%)', () => {
  const tracked = Array.from({ length: 10_000 }, (_, i) => `user-${i}`);
  const filter = endUserFilterOf(tracked);
  // 16 bits an end user: 20 KB for the default maxEndUsers, in the reply as 40 KB of hex.
  expect(filter.bits.length).toBe(40_000);
  const set = endUserSet(filter);
  expect(tracked.every((u) => mayTrack(set, u))).toBe(true);
  const fresh = Array.from({ length: 100_000 }, (_, i) => `new-${i}`);
  const held = fresh.filter((u) => mayTrack(set, u)).length;
  expect(held / fresh.length).toBeLessThan(0.005);
  expect(held).toBeGreaterThan(0);
});

test('the largest filter fits its schema (and a NATS reply, many to one 1 MiB batch part)', () => {
  const most = endUserFilterOf(Array.from({ length: END_USER_FILTER_MAX }, (_, i) => `u${i}`));
  expect(EndUserFilter.safeParse(most).success).toBe(true);
  expect(most.bits.length).toBe(65_536);
  expect(EndUserFilter.safeParse({ k: 4, bits: `${most.bits}00` }).success).toBe(false);
  // An empty filter holds nobody.
  expect(mayTrack(endUserSet({ k: 4, bits: '' }), 'u0')).toBe(false);
});
