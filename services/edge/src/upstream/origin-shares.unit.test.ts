import { expect, test } from 'vitest';
import { OriginShares } from './origin-shares.js';

test("a tenant holds at most its share of an origin's connections; others and other origins are apart", () => {
  const shares = new OriginShares(2);
  const a1 = shares.take('https://api.openai.com', 'a')!;
  const a2 = shares.take('https://api.openai.com', 'a')!;
  expect(shares.take('https://api.openai.com', 'a')).toBeUndefined();
  expect(shares.take('https://api.openai.com', 'b')).toBeDefined();
  expect(shares.take('https://api.anthropic.com', 'a')).toBeDefined();
  // A connection given back twice counts once.
  a1();
  a1();
  expect(shares.held('https://api.openai.com', 'a')).toBe(1);
  expect(shares.take('https://api.openai.com', 'a')).toBeDefined();
  expect(shares.take('https://api.openai.com', 'a')).toBeUndefined();
  a2();
  expect(shares.held('https://api.openai.com', 'a')).toBe(1);
});

test('a share below one connection is refused', () => {
  expect(() => new OriginShares(0)).toThrow(RangeError);
});
