import { describe, expect } from 'vitest';
import { waitFor } from '@holdfast/testkit';
import {
  admissionOf,
  applyOnAnotherReplica,
  BASE_CONFIG,
  newId,
  refusalOf,
  authorityTest as test,
} from './harness.js';
import type { TestAuthority } from '../src/testing.js';

/**
 * Admin changes that race calls in flight, or change a window under the usage it holds: the
 * window keeps what was spent (operations.md: "Budgets keep their spent and held amounts across
 * changes"), and a close bills each window once, what the call really used.
 */

const config = (budgets: Record<string, unknown>[]) => ({
  ...BASE_CONFIG,
  tenants: [
    { id: 'team', budgets, useCases: [{ id: 'uc', maxTokens: 1_000, models: ['gpt-4o-mini'] }] },
  ],
});

const call = (tokens: number, extra: Record<string, unknown> = {}) => ({
  reservationId: newId(),
  tenant: 'team',
  keyId: null,
  useCase: 'uc',
  model: 'gpt-4o-mini',
  promptTokens: tokens,
  maxTokens: 1,
  ...extra,
});

async function spend(h: TestAuthority, tokens: number): Promise<void> {
  const c = call(tokens);
  admissionOf(await h.client.admit(c));
  const s = await h.client.settle({
    reservationId: c.reservationId,
    tenant: 'team',
    usage: { promptTokens: tokens, completionTokens: 0 },
  });
  expect(s).toMatchObject({ ok: true, value: { status: 'settled' } });
}

async function used(h: TestAuthority): Promise<Record<string, [number, number]>> {
  const u = await h.client.usage({ tenant: 'team' });
  if (!u.ok) throw new Error(u.error.message);
  return Object.fromEntries(u.value.tenants[0]!.windows.map((w) => [w.budget, [w.used, w.held]]));
}

async function apply(h: TestAuthority, doc: Record<string, unknown>): Promise<void> {
  const r = await h.client.configApply({ document: doc });
  expect(r.ok).toBe(true);
}

describe('a month window switched between sliding and calendar keeps what it holds', () => {
  test('sliding -> calendar: the month spent so far stays, and leaves on the 1st', async ({
    start,
  }) => {
    const h = await start(config([{ window: 'month', limit: 1_000 }]));
    h.clock.now = Date.UTC(2026, 10, 20, 12, 0, 0);
    await spend(h, 900);
    await apply(h, config([{ window: 'month', limit: 1_000, calendar: true }]));
    // Billed on Nov 20: this calendar month's.
    expect(await used(h)).toEqual({ 'month-tokens': [900, 0] });
    // December: a calendar month starts empty (and 30 days later nothing of it is left in a
    // sliding month either).
    h.clock.now = Date.UTC(2026, 11, 2, 12, 0, 0);
    expect(await used(h)).toEqual({ 'month-tokens': [0, 0] });
    h.clock.now = Date.UTC(2027, 1, 2, 12, 0, 0);
    expect(await used(h)).toEqual({ 'month-tokens': [0, 0] });
    // ... so the team can call again.
    admissionOf(await h.client.admit(call(500)));
  });

  test('a call held across the switch settles to its usage: the spend since the 1st, nothing held', async ({
    start,
  }) => {
    const h = await start(config([{ window: 'month', limit: 10_000 }]));
    h.clock.now = Date.UTC(2026, 9, 25, 12, 0, 0);
    await spend(h, 700); // October: last month's, inside the sliding 30 days
    h.clock.now = Date.UTC(2026, 10, 20, 12, 0, 0);
    await spend(h, 900);
    const c = call(100, { maxTokens: 400 });
    admissionOf(await h.client.admit(c));
    expect(await used(h)).toEqual({ 'month-tokens': [1_600, 500] });
    await apply(h, config([{ window: 'month', limit: 10_000, calendar: true }]));
    expect(await used(h)).toEqual({ 'month-tokens': [900, 500] });
    const r = await h.client.settle({
      reservationId: c.reservationId,
      tenant: 'team',
      usage: { promptTokens: 100, completionTokens: 50 },
    });
    expect(r).toMatchObject({ ok: true, value: { status: 'settled', billedTokens: 150 } });
    expect(await used(h)).toEqual({ 'month-tokens': [1_050, 0] });
  });

  test('calendar -> sliding: the month spent so far stays in the window', async ({ start }) => {
    const h = await start(config([{ window: 'month', limit: 1_000, calendar: true }]));
    h.clock.now = Date.UTC(2026, 10, 20, 12, 0, 0);
    await spend(h, 900);
    await apply(h, config([{ window: 'month', limit: 1_000 }]));
    expect(await used(h)).toEqual({ 'month-tokens': [900, 0] });
    // The team spent 900 of 1,000 in the last 30 days: a call of 500 does not fit.
    const r = await h.client.admit(call(500));
    expect(r.ok && r.value.admitted).toBe(false);
  });
});

describe('a budget added while a call is in flight is billed what the call used, once', () => {
  /**
   * A call held on the month window (lease 1 s), a day budget added while it runs, then the
   * lease run out and the hold expired.
   */
  async function heldThenExpired(
    start: (cfg: ReturnType<typeof config>) => Promise<TestAuthority>,
  ) {
    const h = await start(config([{ window: 'month', limit: 10_000 }]));
    const c = call(100, { maxTokens: 400, leaseMs: 1_000 });
    admissionOf(await h.client.admit(c));
    await apply(
      h,
      config([
        { window: 'month', limit: 10_000 },
        { window: 'day', limit: 10_000 },
      ]),
    );
    await waitFor(() => h.authority.relayedOrgs.includes('team'), { what: 'relay lease' });
    h.clock.advance(1_000);
    expect(await h.authority.expireOverdue()).toBe(1);
    return { h, c };
  }

  test('a release after the expiry gives back nothing to a window the expiry never charged', async ({
    start,
  }) => {
    const { h, c } = await heldThenExpired(start);
    // The expiry billed the hold's worst case on the window it held.
    expect(await used(h)).toEqual({ 'month-tokens': [500, 0], 'day-tokens': [0, 0] });
    const r = await h.client.release({
      reservationId: c.reservationId,
      tenant: 'team',
      reason: 'not_forwarded',
    });
    expect(r).toMatchObject({ ok: true, value: { status: 'released' } });
    expect(await used(h)).toEqual({ 'month-tokens': [0, 0], 'day-tokens': [0, 0] });
    // So the day window still stops the team at its limit: a call of 10,001 does not fit.
    const over = await h.client.admit(call(10_000));
    expect(over.ok && over.value.admitted).toBe(false);
  });

  test('a settle after the expiry bills the new window the whole usage', async ({ start }) => {
    const { h, c } = await heldThenExpired(start);
    const r = await h.client.settle({
      reservationId: c.reservationId,
      tenant: 'team',
      usage: { promptTokens: 100, completionTokens: 50 },
    });
    expect(r).toMatchObject({ ok: true, value: { status: 'settled', billedTokens: 150 } });
    expect(await used(h)).toEqual({ 'month-tokens': [150, 0], 'day-tokens': [150, 0] });
  });

  test('estimate: the prompt charged at admission is billed to the new window too', async ({
    start,
  }) => {
    const est = (budgets: Record<string, unknown>[]) => {
      const c = config(budgets);
      return { ...c, tenants: c.tenants.map((t) => ({ ...t, mode: 'estimate' })) };
    };
    const h = await start(est([{ window: 'month', limit: 10_000 }]));
    const c = call(100, { maxTokens: 400 });
    admissionOf(await h.client.admit(c));
    await apply(
      h,
      est([
        { window: 'month', limit: 10_000 },
        { window: 'day', limit: 10_000 },
      ]),
    );
    const r = await h.client.settle({
      reservationId: c.reservationId,
      tenant: 'team',
      usage: { promptTokens: 100, completionTokens: 50 },
    });
    expect(r).toMatchObject({ ok: true, value: { status: 'settled', billedTokens: 150 } });
    expect(await used(h)).toEqual({ 'month-tokens': [150, 0], 'day-tokens': [150, 0] });
  });
});

describe('a replica that has not heard of a change yet decides a call as the edge knows it', () => {
  test('a limit lowered on another replica (notice not heard): an admit from an edge on the new version is held to it', async ({
    start,
    iso,
  }) => {
    const h = await start(config([{ window: 'month', limit: 10_000 }]));
    // Another replica applies the admin's change; this one hears no notice (lost, or not yet
    // handled) and serves version 1 until its poll, while the edges already serve version 2.
    const lowered = config([{ window: 'month', limit: 1_000 }]);
    expect(await applyOnAnotherReplica(h, iso.keyPrefix, lowered)).toBe(2);
    expect(h.authority.ctx.config.version).toBe(1);
    // A call of 5,001 tokens: admitted against the old 10,000 before, now refused.
    const refused = refusalOf(await h.client.admit(call(5_000, { configVersion: 2 })));
    expect(refused.code).toBe('budget_exceeded');
    expect(h.authority.ctx.config.version).toBe(2);
    expect(await used(h)).toEqual({ 'month-tokens': [0, 0] });
  });
});
