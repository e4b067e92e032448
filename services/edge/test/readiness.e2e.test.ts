import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { apiError, chat, edgeTest as test, KEYS } from './harness.js';

test('the edge is not ready and refuses calls until the authority has a config; then it serves', async ({
  stack,
}) => {
  const s = await stack({ configured: false });
  const ready = async () => (await fetch(`${s.edge.url}/readyz`)).status;
  expect(await ready()).toBe(503);
  const err = await apiError(s.openai(KEYS.support).chat.completions.create(chat()));
  expect(err.status).toBe(503);
  expect(err.code).toBe('budget_authority_unavailable');

  // Applied through the authority's API: its config.changed notice reaches the edge.
  await s.applyConfig();
  await waitFor(async () => (await ready()) === 200, { what: 'the edge to become ready' });
  const reply = await s.openai(KEYS.support).chat.completions.create(chat());
  expect(reply.choices[0]?.finish_reason).toBe('stop');
  await s.settled('support-bot');
});
