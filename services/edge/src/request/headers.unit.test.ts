import type { WindowState } from '@holdfast/events';
import { expect, test } from 'vitest';
import { windowHeaders } from './headers.js';

const w = (over: Partial<WindowState>): WindowState => ({
  tenant: 'team',
  budget: 'month-tokens',
  window: 'month',
  unit: 'tokens',
  limit: 40_000,
  used: 1_000,
  held: 1_394,
  enforce: true,
  ...over,
});

test('remaining budget and RateLimit headers per enforced window, an org above the team included', () => {
  const h = windowHeaders(
    [
      w({}),
      w({
        budget: 'minute-usd',
        window: 'minute',
        unit: 'usd',
        limit: 2_500_000,
        used: 100_000,
        held: 400_000,
      }),
      w({ tenant: 'acme', budget: 'day-tokens', window: 'day', limit: 100, used: 150, held: 0 }),
      w({ budget: 'day-tokens', window: 'day', enforce: false }),
    ],
    'team',
  );
  expect(h).toEqual({
    'x-holdfast-remaining-month-tokens': '37606',
    'x-holdfast-remaining-minute-usd': '2.000000',
    'x-holdfast-remaining-acme-day-tokens': '0',
    'ratelimit-policy':
      '"month-tokens";q=40000;w=2592000;qu="tokens", "minute-usd";q=2500000;w=60;qu="microusd", "acme/day-tokens";q=100;w=86400;qu="tokens"',
    ratelimit: '"month-tokens";r=37606, "minute-usd";r=2000000, "acme/day-tokens";r=0',
  });
});

test('a key and an end user budget are named by scope, never by their ids', () => {
  const h = windowHeaders(
    [
      w({
        budget: 'day-usd',
        window: 'day',
        unit: 'usd',
        limit: 5_000_000,
        used: 0,
        held: 1,
        scope: 'key',
        subject: 'batch-1',
      }),
      w({
        budget: 'day-tokens',
        window: 'day',
        limit: 20_000,
        used: 500,
        held: 0,
        scope: 'end_user',
        subject: 'u"\r\nx: y',
      }),
    ],
    'team',
  );
  expect(h).toEqual({
    'x-holdfast-remaining-key-day-usd': '4.999999',
    'x-holdfast-remaining-user-day-tokens': '19500',
    'ratelimit-policy':
      '"key/day-usd";q=5000000;w=86400;qu="microusd", "user/day-tokens";q=20000;w=86400;qu="tokens"',
    ratelimit: '"key/day-usd";r=4999999, "user/day-tokens";r=19500',
  });
});
