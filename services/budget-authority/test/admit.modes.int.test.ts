import { describe, expect } from 'vitest';
import { waitFor } from '@holdfast/testkit';
import {
  admissionOf,
  BASE_CONFIG,
  newId,
  readEvents,
  refusalOf,
  authorityTest as test,
} from './harness.js';

const model = BASE_CONFIG.models[0]!;

function tenantConfig(tenant: Record<string, unknown>, extra: Record<string, unknown>[] = []) {
  return {
    ...BASE_CONFIG,
    tenants: [
      { useCases: [{ id: 'uc', maxTokens: 1_000, models: ['gpt-4o-mini'] }], ...tenant },
      ...extra,
    ],
  };
}

const call = (tenant: string, promptTokens: number, maxTokens: number) => ({
  reservationId: newId(),
  tenant,
  keyId: null,
  useCase: 'uc',
  model: model.id,
  promptTokens,
  maxTokens,
});

describe('admission modes', () => {
  test('post admits while spent < limit and holds nothing: it overshoots', async ({ start }) => {
    const config = tenantConfig({
      id: 'team',
      mode: 'post',
      budgets: [{ window: 'day', limit: 1_000 }],
    });
    const h = await start(config);
    const calls = [call('team', 100, 900), call('team', 100, 900)];
    for (const c of calls)
      expect(admissionOf(await h.client.admit(c))).toMatchObject({ heldTokens: 0 });
    for (const c of calls)
      await h.client.settle({
        reservationId: c.reservationId,
        tenant: 'team',
        usage: { promptTokens: 100, completionTokens: 900 },
      });
    const refused = refusalOf(await h.client.admit(call('team', 1, 1)));
    expect(refused.code).toBe('budget_exceeded');
    expect(refused.windows[0]).toMatchObject({ used: 2_000, limit: 1_000 });
  });

  test('estimate charges the prompt at admission and the rest at settle', async ({
    iso,
    nc,
    start,
  }) => {
    const config = tenantConfig({
      id: 'team',
      mode: 'estimate',
      budgets: [{ window: 'day', limit: 1_000 }],
    });
    const h = await start(config);
    const c = call('team', 300, 1_000);
    expect(admissionOf(await h.client.admit(c)).windows[0]).toMatchObject({ used: 300, held: 0 });
    const s = await h.client.settle({
      reservationId: c.reservationId,
      tenant: 'team',
      usage: { promptTokens: 300, completionTokens: 500 },
    });
    expect(s.ok && s.value.windows[0]).toMatchObject({ used: 800, held: 0 });
    // 800 + 300 > 1000: the next prompt does not fit.
    expect(refusalOf(await h.client.admit(call('team', 300, 10))).code).toBe('budget_exceeded');
    const events = await waitFor(async () => {
      const e = await readEvents(nc, iso.names);
      return e.some((x) => x.type === 'admission.refused') ? e : undefined;
    });
    const created = events.find((e) => e.type === 'reservation.created');
    const settled = events.find((e) => e.type === 'reservation.settled');
    expect(created).toMatchObject({ chargedTokens: 300, heldTokens: 0 });
    expect(settled).toMatchObject({ billedTokens: 800, chargedTokens: 500 });
  });

  test('meter admits everything and bills after', async ({ start }) => {
    const config = tenantConfig({
      id: 'team',
      mode: 'meter',
      budgets: [{ window: 'day', limit: 10 }],
    });
    const h = await start(config);
    for (let i = 0; i < 3; i++) {
      const c = call('team', 100, 100);
      admissionOf(await h.client.admit(c));
      await h.client.settle({
        reservationId: c.reservationId,
        tenant: 'team',
        usage: { promptTokens: 100, completionTokens: 100 },
      });
    }
    const u = await h.client.usage({ tenant: 'team' });
    expect(u.ok && u.value.tenants[0]?.windows[0]).toMatchObject({ used: 600, limit: 10 });
  });

  test('usd budgets count integer micro-USD with input and output priced apart', async ({
    start,
  }) => {
    // $0.002 = 2,000 micro-USD. A call of 1,000 prompt + 1,000 output costs 150 + 600 = 750.
    const config = tenantConfig({
      id: 'team',
      budgets: [{ window: 'minute', limit: 0.002, unit: 'usd' }],
    });
    const h = await start(config);
    const a = admissionOf(await h.client.admit(call('team', 1_000, 1_000)));
    expect(a).toMatchObject({ heldMicroUsd: 750, heldTokens: 2_000 });
    admissionOf(await h.client.admit(call('team', 1_000, 1_000)));
    const refused = refusalOf(await h.client.admit(call('team', 1_000, 1_000)));
    expect(refused).toMatchObject({
      code: 'budget_exceeded',
      budget: 'minute-usd',
      neededMicroUsd: 750,
    });
    expect(refused.message).toBe(
      'This call could cost up to $0.00075 (1,000 prompt + 1,000 max_tokens) and team team has $0.0005 left in its minute window; calls in flight hold another $0.0015. Lower max_tokens or raise the budget.',
    );
    // Cached prompt tokens are priced at the cached rate: 500 × 0.15 + 500 × 0.075 + 10 × 0.6 = 118.5 → 119.
    const s = await h.client.settle({
      reservationId: a.reservationId,
      tenant: 'team',
      usage: { promptTokens: 1_000, completionTokens: 10, cachedPromptTokens: 500 },
    });
    expect(s).toMatchObject({
      ok: true,
      value: { status: 'settled', costMicroUsd: 119, billedTokens: 1_010 },
    });
  });

  test('an org budget above the team is checked and charged in the same step', async ({
    start,
  }) => {
    const config = tenantConfig(
      { id: 'team-a', parent: 'acme', budgets: [{ window: 'day', limit: 10_000 }] },
      [
        { id: 'acme', budgets: [{ window: 'day', limit: 3_000 }], maxInFlight: 100 },
        {
          id: 'team-b',
          parent: 'acme',
          budgets: [],
          useCases: [{ id: 'uc', maxTokens: 1_000, models: ['gpt-4o-mini'] }],
        },
      ],
    );
    const h = await start(config);
    const a = admissionOf(await h.client.admit(call('team-a', 500, 1_000)));
    expect(a.windows.map((w) => [w.tenant, w.held])).toEqual([
      ['team-a', 1_500],
      ['acme', 1_500],
    ]);
    admissionOf(await h.client.admit(call('team-b', 500, 1_000)));
    const refused = refusalOf(await h.client.admit(call('team-a', 500, 1_000)));
    expect(refused).toMatchObject({
      code: 'budget_exceeded',
      level: 'acme',
      budget: 'day-tokens',
    });
    expect(refused.message).toContain('org acme (above team team-a) has 0 tokens left');
    await h.client.settle({
      reservationId: a.reservationId,
      tenant: 'team-a',
      usage: { promptTokens: 500, completionTokens: 100 },
    });
    const u = await h.client.usage({});
    const acme = u.ok ? u.value.tenants.find((t) => t.tenant === 'acme') : undefined;
    expect(acme).toMatchObject({ billedTokens: 600, inFlight: 1 });
    expect(acme?.windows[0]).toMatchObject({ used: 600, held: 1_500 });
  });

  test('shrink to fit lowers max_tokens to what the budget can pay for', async ({ start }) => {
    const config = tenantConfig({
      id: 'team',
      shrinkToFit: { minOutputTokens: 100 },
      budgets: [{ window: 'day', limit: 1_500 }],
    });
    const h = await start(config);
    admissionOf(await h.client.admit(call('team', 200, 800)));
    const shrunk = admissionOf(await h.client.admit(call('team', 200, 800)));
    expect(shrunk).toMatchObject({ shrunk: true, maxTokens: 300, heldTokens: 500 });
    // Less than prompt + the useful minimum is left: refused.
    expect(refusalOf(await h.client.admit(call('team', 200, 800))).code).toBe('budget_exceeded');
  });

  test('a shadow budget records the refusal it would make and admits the call', async ({
    iso,
    nc,
    start,
  }) => {
    const config = tenantConfig({
      id: 'team',
      budgets: [
        { window: 'day', limit: 100_000 },
        { window: 'minute', limit: 1_000, enforce: false },
      ],
    });
    const h = await start(config);
    admissionOf(await h.client.admit(call('team', 500, 1_000)));
    const events = await waitFor(async () => {
      const e = await readEvents(nc, iso.names);
      return e.some((x) => x.type === 'reservation.created') ? e : undefined;
    });
    expect(events.find((e) => e.type === 'admission.refused')).toMatchObject({
      shadow: true,
      budget: 'minute-tokens',
      code: 'budget_exceeded',
    });
  });

  test('use case and model not registered are refused with an event; unknown tenants without one', async ({
    iso,
    nc,
    start,
  }) => {
    const config = tenantConfig({ id: 'team', budgets: [{ window: 'day', limit: 100_000 }] });
    const h = await start(config);
    expect(
      refusalOf(await h.client.admit({ ...call('team', 1, 1), useCase: 'UC-999' })),
    ).toMatchObject({
      code: 'use_case_not_registered',
      message: 'Use case "UC-999" is not registered for team team.',
    });
    expect(
      refusalOf(await h.client.admit({ ...call('team', 1, 1), model: 'gpt-4o' })),
    ).toMatchObject({ code: 'model_not_allowed' });
    expect(
      refusalOf(await h.client.admit({ ...call('team', 1, 1), model: 'no-such-model' })),
    ).toMatchObject({ code: 'model_not_allowed' });
    expect(refusalOf(await h.client.admit(call('nobody', 1, 1)))).toMatchObject({
      code: 'unknown_tenant',
      message: 'Unknown team "nobody".',
    });
    const events = await waitFor(async () => {
      const e = (await readEvents(nc, iso.names)).filter((x) => x.type === 'admission.refused');
      return e.length === 3 ? e : undefined;
    });
    expect(events.map((e) => e.type === 'admission.refused' && e.code)).toEqual([
      'use_case_not_registered',
      'model_not_allowed',
      'model_not_allowed',
    ]);
  });

  test('an uncounted admit (the edge did not count the prompt) is refused as unregistered with its event, or answered not_counted, never admitted', async ({
    iso,
    nc,
    start,
  }) => {
    const config = tenantConfig({ id: 'team', budgets: [{ window: 'day', limit: 100_000 }] });
    const h = await start(config);
    const uncounted = (over: Record<string, unknown>) =>
      h.client.admit({ ...call('team', 0, 1_000), uncounted: true, ...over });
    expect(refusalOf(await uncounted({ useCase: 'UC-999' }))).toMatchObject({
      code: 'use_case_not_registered',
      neededTokens: 0,
    });
    expect(refusalOf(await uncounted({ model: 'gpt-4o' }))).toMatchObject({
      code: 'model_not_allowed',
    });
    // Registered here (the edge's config is behind): nothing held, the edge counts and asks again.
    const registered = await uncounted({});
    expect(registered.ok).toBe(false);
    if (!registered.ok) expect(registered.error.code).toBe('not_counted');
    const usage = await h.client.usage({ tenant: 'team' });
    if (!usage.ok) throw new Error(usage.error.code);
    expect(usage.value.tenants[0]!.windows.every((w) => w.used === 0 && w.held === 0)).toBe(true);
    admissionOf(await h.client.admit(call('team', 500, 1_000)));
    const events = await waitFor(async () => {
      const e = await readEvents(nc, iso.names);
      return e.some((x) => x.type === 'reservation.created') ? e : undefined;
    });
    const kinds = events.map((e) => (e.type === 'admission.refused' ? e.code : e.type));
    expect(kinds.filter((k) => k !== 'config.changed')).toEqual([
      'use_case_not_registered',
      'model_not_allowed',
      'reservation.created',
    ]);
  });

  test('an uncounted admit of a registered call is evaluated with its prompt taken as 0: refused and recorded when even that does not fit, else not_counted; nothing held, no new end user kept', async ({
    iso,
    nc,
    redis,
    start,
  }) => {
    const config = tenantConfig({
      id: 'team',
      budgets: [{ window: 'day', limit: 1_000 }],
      endUserBudgets: [{ window: 'day', limit: 500 }],
    });
    const h = await start(config);
    const held = call('team', 500, 400);
    admissionOf(await h.client.admit(held));
    const uncounted = (maxTokens: number, over: Record<string, unknown> = {}) =>
      h.client.admit({ ...call('team', 0, maxTokens), uncounted: true, ...over });
    // 900 held: even an empty prompt with 200 of output does not fit.
    expect(refusalOf(await uncounted(200))).toMatchObject({
      code: 'budget_exceeded',
      neededTokens: 200,
    });
    const fits = await uncounted(100);
    expect(fits.ok).toBe(false);
    if (!fits.ok) expect(fits.error.code).toBe('not_counted');
    // A new end user's windows, read to evaluate it, are not kept.
    const newUser = await uncounted(100, { endUser: 'user-1' });
    expect(newUser.ok || newUser.error.code).toBe('not_counted');
    expect(await redis.keys(`${iso.keyPrefix}*user-1*`)).toEqual([]);
    const usage = await h.client.usage({ tenant: 'team' });
    if (!usage.ok) throw new Error(usage.error.code);
    expect(usage.value.tenants[0]!.windows[0]).toMatchObject({ used: 0, held: 900 });
    expect(usage.value.tenants[0]!.inFlight).toBe(1);
    await h.client.suspend({ tenant: 'team', reason: 'test', by: 'admin' });
    expect(refusalOf(await uncounted(1))).toMatchObject({ code: 'tenant_suspended' });
    const events = await waitFor(async () => {
      const e = await readEvents(nc, iso.names);
      return e.filter((x) => x.type === 'admission.refused').length >= 2 ? e : undefined;
    });
    const refusals = events.filter((e) => e.type === 'admission.refused');
    expect(refusals).toMatchObject([
      { code: 'budget_exceeded', promptTokens: 0, maxTokens: 200, neededTokens: 200 },
      { code: 'tenant_suspended', promptTokens: 0 },
    ]);
    expect(events.filter((e) => e.type === 'reservation.created')).toHaveLength(1);
  });
});
