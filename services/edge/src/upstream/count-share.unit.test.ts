import type { UpstreamConfig } from '@holdfast/config';
import { Err, Ok, RpcError } from '@holdfast/runtime';
import { expect, test } from 'vitest';
import { takeCount } from './limits-reporter.js';

const claude = { id: 'claude', countsPerMinute: 10 } as UpstreamConfig;
const quiet = { warn: () => undefined };

/** The authority's word on a count as the counter's: send it, or not yet and why. */
test('a count past the share is count_limited with its wait; taken, or no answer, it is sent', async () => {
  const answer = (reply: unknown) => () => ({ takeCount: () => Promise.resolve(reply) }) as never;
  const mine = await takeCount(
    answer(Ok({ taken: false, retryAfterSeconds: 7, who: 'tenant' })),
    'team',
    claude,
    1_000,
    quiet,
  );
  expect(mine).toMatchObject({ code: 'count_limited', status: 429, retryAfterMs: 7_000 });
  expect(mine?.message).toContain("team team has taken its share of upstream claude's counting");
  const all = await takeCount(
    answer(Ok({ taken: false, retryAfterSeconds: 2, who: 'all' })),
    'team',
    claude,
    1_000,
    quiet,
  );
  expect(all?.message).toContain('is taken for this team');
  expect(await takeCount(answer(Ok({ taken: true })), 'team', claude, 1_000, quiet)).toBe(
    undefined,
  );
  const down = Err(new RpcError({ code: 'timeout', message: 'no reply' }));
  expect(await takeCount(answer(down), 'team', claude, 1_000, quiet)).toBe(undefined);
});
