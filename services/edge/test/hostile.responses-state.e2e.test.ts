import { expect } from 'vitest';
import { edgeTest as test, entry, KEYS } from './harness.js';
import { post, words } from './surfaces.js';

/**
 * Red team, state kept upstream on a model with an allowance (found by an audit of the
 * Responses surface). `upstreamStateAllowanceTokens` admits what an upstream cannot count
 * (it has no input_tokens endpoint) at the allowance; a model needs it for any provider-run
 * tool, so it is commonly set. But a count the upstream refused for now (its counting
 * rate-limited, the tenant's share of its connections taken: states a team reaches by
 * counting a lot) took the allowance too, so a previous_response_id whose stored conversation
 * is thousands of tokens was held 500 and billed the whole conversation, past a reserve limit.
 * Such a count works later: the call is refused with a 429 to retry, nothing held or sent.
 */

test('a previous response the upstream cannot count now (counting rate-limited) is a 429 to retry, not held at the allowance', async ({
  stack,
}) => {
  const s = await stack({
    behaviour: { counting: { requestsPerMinute: 1 } },
    patch: (c) => {
      entry(c.models, 'gpt-4o-mini').upstreamStateAllowanceTokens = 500;
      entry(c.tenants, 'support-bot').budgets = [
        { window: 'month', limit: 1_000_000, unit: 'tokens' },
      ];
    },
  });
  const auth = { authorization: `Bearer ${KEYS.support}` };
  // A stored conversation of about 3,000 tokens.
  const first = await post(
    s,
    '/v1/responses',
    { model: 'gpt-4o-mini', input: words(3_000), max_output_tokens: 40 },
    auth,
  );
  expect(first.status).toBe(200);
  const next = { model: 'gpt-4o-mini', previous_response_id: first.body.id, input: words(5) };
  // The upstream's one count a minute: this call is counted exactly and served.
  const counted = await post(s, '/v1/responses', { ...next, max_output_tokens: 40 }, auth);
  expect(counted.status).toBe(200);
  expect(Number(counted.headers.get('x-holdfast-prompt-tokens'))).toBeGreaterThan(3_000);
  // The next cannot be counted for a minute: a 429 to retry, not 505 held and 3,000 billed.
  const sent = s.upstream.stats().requests.responses;
  const limited = await post(s, '/v1/responses', { ...next, max_output_tokens: 40 }, auth);
  expect(limited.status).toBe(429);
  expect(limited.body.error).toMatchObject({ code: 'upstream_rate_limited' });
  expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(s.upstream.stats().requests.responses).toBe(sent);
  const events = await s.events();
  expect(events.filter((e) => e.type === 'reservation.overrun')).toEqual([]);
  await s.settled('support-bot');
});
