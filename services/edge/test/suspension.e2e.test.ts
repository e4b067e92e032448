import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { apiError, chat, edgeTest as test, KEYS, UNREAD_AT_HANGUP } from './harness.js';

test('a suspension ends the tenant calls in flight after its grace: settled as budget_exhausted', async ({
  stack,
}) => {
  const s = await stack({
    behaviour: { tokenDelayMs: 20, completion: { mode: 'fixed', tokens: 2_000 } },
  });
  const openai = s.openai(KEYS.support);
  const stream = await openai.chat.completions.create({ ...chat(5), stream: true });
  let streamed = 0;
  const streaming = apiError(
    (async () => {
      for await (const chunk of stream) if (chunk.choices[0]?.delta.content) streamed++;
    })(),
  );
  const whole = openai.chat.completions.create(chat(5)).withResponse();
  // Another team's call is not touched.
  const other = s.openai(KEYS.batch).chat.completions.create(chat(5, { max_tokens: 40 }));
  await waitFor(() => s.upstream.stats().inFlight === 3);

  await s.client.suspend({ tenant: 'support-bot', reason: 'test', by: 'alerter', graceMs: 100 });

  const err = await streaming;
  expect(err.code).toBe('tenant_suspended');
  expect(streamed).toBeGreaterThan(0);
  const { data, response } = await whole;
  expect(response.headers.get('x-holdfast-ended')).toBe('tenant_suspended');
  expect(data.choices[0]?.finish_reason).toBe('length');
  expect((await other).choices[0]?.finish_reason).toBe('length');

  await waitFor(() => s.upstream.stats().abortedByClient === 2, { what: 'both upstream aborts' });
  const usage = await s.settled('support-bot');
  const billed = s.upstream.stats().recent.filter((r) => r.maxTokens === 512);
  const provider = billed.reduce((n, r) => n + r.promptTokens + r.completionTokens, 0);
  expect(usage.billedTokens).toBeLessThanOrEqual(provider);
  // Two calls cut: each may leave tokens the provider sent and the edge never read.
  expect(usage.billedTokens).toBeGreaterThanOrEqual(provider - 2 * UNREAD_AT_HANGUP);
  const events = await s.events(
    (e) =>
      e.filter((x) => x.type === 'reservation.settled' && x.tenant === 'support-bot').length === 2,
  );
  const outcomes = events
    .filter((e) => e.type === 'reservation.settled' && e.tenant === 'support-bot')
    .map((e) => (e.type === 'reservation.settled' ? e.outcome : ''));
  expect(outcomes).toEqual(['budget_exhausted', 'budget_exhausted']);
});

test('a resume within the grace lets the calls in flight finish', async ({ stack }) => {
  const s = await stack({
    behaviour: { tokenDelayMs: 5, completion: { mode: 'fixed', tokens: 200 } },
  });
  const whole = s.openai(KEYS.support).chat.completions.create(chat(5)).withResponse();
  await waitFor(() => s.upstream.stats().inFlight === 1);

  await s.client.suspend({ tenant: 'support-bot', reason: 'test', by: 'admin', graceMs: 500 });
  await s.client.resume({ tenant: 'support-bot', by: 'admin' });

  const { data, response } = await whole;
  expect(response.headers.get('x-holdfast-ended')).toBeNull();
  expect(data.choices[0]?.finish_reason).toBe('stop');
  expect(data.usage?.completion_tokens).toBe(200);
});
