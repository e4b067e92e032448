import { expect } from 'vitest';
import { waitFor } from '@holdfast/testkit';
import {
  admissionOf,
  BASE_CONFIG,
  newId,
  readEvents,
  refusalOf,
  authorityTest as test,
} from './harness.js';
import type { TestAuthority } from '../src/testing.js';

const team = (tenant: Record<string, unknown>) => ({
  ...BASE_CONFIG,
  tenants: [
    { id: 'team', useCases: [{ id: 'uc', maxTokens: 2_000, models: ['gpt-4o-mini'] }], ...tenant },
  ],
});

const call = (promptTokens: number, maxTokens: number) => ({
  reservationId: newId(),
  tenant: 'team',
  keyId: null,
  useCase: 'uc',
  model: 'gpt-4o-mini',
  promptTokens,
  maxTokens,
});

/** Bills `tokens` to the team: one call admitted and settled at that prompt. */
async function spend(h: TestAuthority, prompt: number, completion: number) {
  const c = call(prompt, completion);
  admissionOf(await h.client.admit(c));
  await h.client.settle({
    reservationId: c.reservationId,
    tenant: 'team',
    usage: { promptTokens: prompt, completionTokens: completion },
  });
}

test('a shrink-to-fit refusal says what is left and what even the smallest call needs, not "more than the whole budget"', async ({
  start,
  nc,
  iso,
}) => {
  const h = await start(
    team({ shrinkToFit: { minOutputTokens: 16 }, budgets: [{ window: 'month', limit: 1_000 }] }),
  );
  await spend(h, 486, 500); // 986 of 1,000 used: 14 left
  const refused = refusalOf(await h.client.admit(call(16, 1_016)));
  expect(refused.message).toBe(
    'This call could use up to 1,032 tokens (16 prompt + 1,016 max_tokens), and team team has 14 tokens left in its month window (986 tokens used, of 1,000 tokens). Shrink to fit could not make it fit: the prompt with the minimum output of 16 tokens needs 32 tokens. Shorten the prompt, wait for the window to free room, or raise the budget.',
  );
  // The event on the stream carries the same message.
  const events = await waitFor(async () => {
    const e = await readEvents(nc, iso.names);
    return e.find((x) => x.type === 'admission.refused');
  });
  expect(events).toMatchObject({ message: refused.message });
});

test('a USD refusal keeps every micro-dollar: $0.000155 against $0.000096, not $0.0002 against $0.0001', async ({
  start,
}) => {
  // gpt-4o-mini: $0.15 / $0.60 per M tokens. $0.000500 a minute.
  const h = await start(team({ budgets: [{ window: 'minute', limit: 0.0005, unit: 'usd' }] }));
  await spend(h, 1_000, 440); // 150 + 264 = 414 micro-USD used: 86 left
  // 100 prompt + 233 output: 15 + 139.8 -> 155 micro-USD.
  const refused = refusalOf(await h.client.admit(call(100, 233)));
  expect(refused).toMatchObject({ neededMicroUsd: 155, code: 'budget_exceeded' });
  expect(refused.message).toBe(
    'This call could cost up to $0.000155 (100 prompt + 233 max_tokens) and team team has $0.000086 left in its minute window. Lower max_tokens or raise the budget.',
  );
});

test('a call larger than the whole budget says so, with its parts', async ({ start }) => {
  const h = await start(team({ budgets: [{ window: 'day', limit: 1_000 }] }));
  expect(refusalOf(await h.client.admit(call(400, 1_200))).message).toBe(
    'This call could use up to 1,600 tokens (400 prompt + 1,200 max_tokens), more than the whole day budget of team team (1,000 tokens). Lower max_tokens or raise the budget.',
  );
});
