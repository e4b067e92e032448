import type { HoldfastEvent, ThresholdCrossed } from '@holdfast/events';
import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { call } from './authority.js';
import {
  cleanupAfterEach,
  readEvents,
  startWithAuthority,
  alerterTest as test,
} from './harness.js';

const cleanup = cleanupAfterEach();

const config = (day: (limit: number) => Record<string, unknown>[]) => ({
  upstreams: [{ id: 'default', baseUrl: 'http://127.0.0.1:8089/v1' }],
  models: [
    { id: 'gpt-4o-mini', upstream: 'default', price: { inputPerMTok: 0.15, outputPerMTok: 0.6 } },
  ],
  tenants: [
    { id: 'team-e', mode: 'estimate', limit: 120 },
    { id: 'team-r', mode: 'reserve', limit: 160 },
  ].map(({ id, mode, limit }) => ({
    id,
    mode,
    budgets: [{ window: 'month', limit: 10_000, soft: [0.8] }, ...day(limit)],
    useCases: [{ id: 'UC-1', maxTokens: 1_000, models: ['gpt-4o-mini'] }],
  })),
  alerts: { suspendAtHardLimit: false },
});
const before = config(() => []);
const after = config((limit) => [{ window: 'day', limit, soft: [0.8] }]);

/**
 * A day budget added while a call is in flight: the settle bills it the call's whole usage
 * (150), while the event's `chargedTokens` is what the call's other windows got (estimate: 50
 * past the prompt charged at admission; reserve after an expiry: -350 against the worst case
 * the expiry billed). Reading `before` as `used - chargedTokens` (100, or 500), the alerter saw
 * the day window already past 80% before the settle, or not moved at all, and never said it
 * crossed 80%.
 */
test('a budget added mid-call crosses its threshold on the settle that bills it', async ({
  nc,
  natsUrl,
  redisUrl,
  iso,
}) => {
  const ctx = { nc, natsUrl, redisUrl, iso };
  const { authority, client } = await startWithAuthority(ctx, cleanup, before, after);

  const e = call('team-e', 100, 400);
  const r = { ...call('team-r', 100, 400), leaseMs: 1_000 };
  for (const x of [e, r])
    expect(await client.admit(x)).toMatchObject({ ok: true, value: { admitted: true } });
  expect((await client.configApply({ document: after })).ok).toBe(true);
  const usage = { promptTokens: 100, completionTokens: 50 };
  await client.settle({ reservationId: e.reservationId, tenant: 'team-e', usage });
  await waitFor(() => authority.authority.relayedOrgs.includes('team-r'), {
    what: 'relay lease',
  });
  authority.clock.advance(1_000);
  expect(await authority.authority.expireOverdue()).toBe(1);
  await client.settle({ reservationId: r.reservationId, tenant: 'team-r', usage });

  const crossings = await waitFor(
    async () => {
      const found = (await readEvents(nc, iso.names)).filter(
        (x): x is ThresholdCrossed => x.type === 'threshold.crossed',
      );
      return found.length >= 2 ? found : undefined;
    },
    { timeoutMs: 15_000, what: 'two threshold crossings' },
  );
  expect(crossings.map((c) => [c.tenant, c.budget, c.threshold, c.used, c.limit]).sort()).toEqual([
    ['team-e', 'day-tokens', 0.8, 150, 120],
    ['team-r', 'day-tokens', 0.8, 150, 160],
  ]);
});

const planOf = (day: Record<string, unknown>[]) => ({
  upstreams: [{ id: 'default', baseUrl: 'http://127.0.0.1:8089/v1' }],
  models: [
    { id: 'gpt-4o-mini', upstream: 'default', price: { inputPerMTok: 0.15, outputPerMTok: 0.6 } },
  ],
  tenants: [
    {
      id: 'team',
      budgets: [{ window: 'month', limit: 2_000, soft: [0.8] }, ...day],
      useCases: [{ id: 'UC-1', maxTokens: 1_000, models: ['gpt-4o-mini'] }],
    },
  ],
});
const withDay = planOf([{ window: 'day', limit: 600, soft: [0.8] }]);
const without = planOf([]);

/**
 * A day budget removed while a call is held: the settle's event lists the day window (the
 * close billed it), as `removed` with limit 0. That is no budget: the alerter neither says it
 * crossed a threshold (150 against a limit of 0 would be past every one) nor suspends on it.
 */
test('a removed window crosses no threshold', async ({ nc, natsUrl, redisUrl, iso }) => {
  const { client } = await startWithAuthority(
    { nc, natsUrl, redisUrl, iso },
    cleanup,
    withDay,
    without,
  );

  const held = call('team', 100, 400);
  expect(await client.admit(held)).toMatchObject({ ok: true, value: { admitted: true } });
  expect((await client.configApply({ document: without })).ok).toBe(true);
  const usage = { promptTokens: 100, completionTokens: 50 };
  await client.settle({ reservationId: held.reservationId, tenant: 'team', usage });
  // Then a call that takes the month window past 80%: its crossing says the alerter got there.
  const next = call('team', 900, 600);
  expect(await client.admit(next)).toMatchObject({ ok: true, value: { admitted: true } });
  const big = { promptTokens: 900, completionTokens: 600 };
  await client.settle({ reservationId: next.reservationId, tenant: 'team', usage: big });

  const events = await waitFor(
    async () => {
      const all = await readEvents(nc, iso.names);
      return all.some((x) => x.type === 'threshold.crossed') ? all : undefined;
    },
    { timeoutMs: 15_000, what: "the month window's crossing" },
  );
  const settled = events.find(
    (x): x is Extract<HoldfastEvent, { type: 'reservation.settled' }> =>
      x.type === 'reservation.settled' && x.reservationId === held.reservationId,
  );
  expect(settled?.windows.find((w) => w.budget === 'day-tokens')).toMatchObject({
    used: 150,
    limit: 0,
    removed: true,
  });
  // A moment for anything the day window would have caused.
  await new Promise((r) => setTimeout(r, 500));
  const alerts = (await readEvents(nc, iso.names)).filter(
    (x) => x.type === 'threshold.crossed' || x.type === 'tenant.suspended',
  );
  expect(alerts.map((a) => [a.type, (a as ThresholdCrossed).budget])).toEqual([
    ['threshold.crossed', 'month-tokens'],
  ]);
});
