import { expect } from 'vitest';
import type { TestAuthority } from '../src/testing.js';
import { admissionOf, BASE_CONFIG, landsBefore, newId, authorityTest as test } from './harness.js';

/**
 * A usage reply is one instant of its tenant: the end users it lists (read from their registry
 * first, to know whose windows to read) are those of the instant its windows and calls in
 * flight are read at. A close or an admission that lands between the two reads (it changes the
 * registry: an end user registered or new) is seen by both or by neither. Before, the reply
 * could say a call was closed and billed, and not list the end user its close registered
 * (hostile.keys' "end-user budgets added while a call of the end user streams", which polls
 * the usage while the edge settles).
 */

const DAY = { window: 'day', limit: 100_000 };

const config = (endUserBudgets: unknown[]) => ({
  ...BASE_CONFIG,
  tenants: [
    {
      id: 'team',
      budgets: [{ window: 'month', limit: 1_000_000 }],
      endUserBudgets,
      useCases: [{ id: 'uc', maxTokens: 1_000, models: ['gpt-4o-mini'] }],
    },
  ],
});

const call = (endUser: string) => ({
  reservationId: newId(),
  tenant: 'team',
  keyId: null,
  endUser,
  useCase: 'uc',
  model: 'gpt-4o-mini',
  promptTokens: 100,
  maxTokens: 400,
});

/** Lands `first` just before the usage's read of the windows (after its registry read). */
const beforeUsageScript = (h: TestAuthority, first: () => Promise<void>) =>
  landsBefore(h, (fn) => fn.startsWith('hf_usage_'), first);

async function teamUsage(h: TestAuthority, endUser: string | undefined) {
  const u = await h.client.usage({ tenant: 'team', ...(endUser ? { endUser } : {}) });
  if (!u.ok) throw new Error(u.error.message);
  return u.value.tenants[0]!;
}

// Every end user, and the one a client asks about.
for (const asked of [undefined, 'erin'] as const) {
  const who = asked ? ' (asked about by name)' : '';

  test(`a settle that registers its end user (an end-user budget added mid-call) between the usage's two reads: the reply that shows the call billed lists the end user${who}`, async ({
    start,
  }) => {
    const h = await start(config([]));
    const c = call('erin');
    admissionOf(await h.client.admit(c));
    expect((await h.client.configApply({ document: config([DAY]) })).ok).toBe(true);
    beforeUsageScript(h, async () => {
      const s = await h.client.settle({
        reservationId: c.reservationId,
        tenant: 'team',
        endUser: 'erin',
        usage: { promptTokens: 100, completionTokens: 50 },
      });
      expect(s).toMatchObject({ ok: true, value: { status: 'settled', billedTokens: 150 } });
    });
    const u = await teamUsage(h, asked);
    expect(u.inFlight).toBe(0);
    expect(u.billedTokens).toBe(150);
    expect(u.endUserCount).toBe(1);
    expect(u.endUsers.map((e) => [e.id, e.windows.map((w) => [w.used, w.held])])).toEqual([
      ['erin', [[150, 0]]],
    ]);
  });

  test(`a new end user's admission between the usage's two reads: the reply that counts its hold lists the end user holding it${who}`, async ({
    start,
  }) => {
    const h = await start(config([DAY]));
    let held = 0;
    beforeUsageScript(h, async () => {
      held = admissionOf(await h.client.admit(call('erin'))).heldTokens;
    });
    const u = await teamUsage(h, asked);
    expect(held).toBeGreaterThan(0);
    expect(u.inFlight).toBe(1);
    expect(u.windows.map((w) => w.held)).toEqual([held]);
    expect(u.endUserCount).toBe(1);
    expect(u.endUsers.map((e) => [e.id, e.windows.map((w) => [w.used, w.held])])).toEqual([
      ['erin', [[0, held]]],
    ]);
  });
}
