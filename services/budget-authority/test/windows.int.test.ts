import { describe, expect } from 'vitest';
import { waitFor } from '@holdfast/testkit';
import {
  admissionOf,
  BASE_CONFIG,
  miniCall,
  readEvents,
  refusalOf,
  authorityTest as test,
} from './harness.js';
import type { TestAuthority } from '../src/testing.js';

const config = (budgets: Record<string, unknown>[]) => ({
  ...BASE_CONFIG,
  tenants: [
    { id: 'team', budgets, useCases: [{ id: 'uc', maxTokens: 1_000, models: ['gpt-4o-mini'] }] },
  ],
});

/** An admit of team's use case `uc` on gpt-4o-mini, by no key. */
const call = (promptTokens: number, maxTokens: number) => ({
  ...miniCall(promptTokens, maxTokens),
  tenant: 'team',
  useCase: 'uc',
});

async function spend(h: TestAuthority, tokens: number): Promise<void> {
  const { reservationId: id } = admissionOf(await h.client.admit(call(tokens, 1)));
  await h.client.settle({
    reservationId: id,
    tenant: 'team',
    usage: { promptTokens: tokens, completionTokens: 0 },
  });
}

/** A hold of 1,000 tokens (100 prompt + 900 output) on a 60 s lease, its org relayed. */
async function heldFor60s(h: TestAuthority): Promise<string> {
  const { reservationId: id } = admissionOf(
    await h.client.admit({ ...call(100, 900), leaseMs: 60_000 }),
  );
  await waitFor(() => h.authority.relayedOrgs.includes('team'), {
    what: 'relay lease on the org',
  });
  return id;
}

async function used(h: TestAuthority): Promise<number[]> {
  const u = await h.client.usage({ tenant: 'team' });
  if (!u.ok) throw new Error(u.error.message);
  return u.value.tenants[0]!.windows.map((w) => w.used);
}

describe('sliding windows (1 s buckets for a minute, 1 min for a day, 1 h for 30 days)', () => {
  test('usage leaves the minute window 60 s after it was billed', async ({ start }) => {
    const h = await start(
      config([
        { window: 'minute', limit: 1_000 },
        { window: 'day', limit: 100_000 },
      ]),
    );
    await spend(h, 600);
    h.clock.advance(30_000);
    await spend(h, 300);
    expect(await used(h)).toEqual([900, 900]);
    h.clock.advance(29_999);
    expect(await used(h)).toEqual([900, 900]);
    h.clock.advance(1);
    expect(await used(h)).toEqual([300, 900]);
    h.clock.advance(30_000);
    expect(await used(h)).toEqual([0, 900]);
    // The day window keeps it for 24 h.
    h.clock.advance(24 * 3_600_000);
    expect(await used(h)).toEqual([0, 0]);
  });

  test('Retry-After says when enough billed usage leaves the window', async ({ start }) => {
    const h = await start(config([{ window: 'minute', limit: 1_000 }]));
    await spend(h, 400);
    h.clock.advance(20_000);
    await spend(h, 500);
    // Needs 300: only when the first 400 leave (40 s from now) does it fit.
    const r = refusalOf(await h.client.admit(call(299, 1)));
    expect(r.retryAfterSeconds).toBe(40);
    h.clock.advance(40_000);
    admissionOf(await h.client.admit(call(299, 1)));
  });

  test('a window idle for longer than itself starts empty', async ({ start }) => {
    const h = await start(config([{ window: 'month', limit: 100_000 }]));
    await spend(h, 1_000);
    h.clock.advance(29 * 86_400_000);
    await spend(h, 10);
    expect(await used(h)).toEqual([1_010]);
    h.clock.advance(86_400_000);
    expect(await used(h)).toEqual([10]);
    h.clock.advance(365 * 86_400_000);
    expect(await used(h)).toEqual([0]);
  });

  test('a calendar month resets on the 1st (UTC)', async ({ start }) => {
    const h = await start(config([{ window: 'month', limit: 1_000, calendar: true }]));
    h.clock.now = Date.UTC(2026, 10, 30, 23, 59, 0);
    await spend(h, 999);
    const r = refusalOf(await h.client.admit(call(10, 1)));
    expect(r.retryAfterSeconds).toBe(60);
    h.clock.now = Date.UTC(2026, 11, 1, 0, 0, 0);
    expect(await used(h)).toEqual([0]);
  });
});

describe('leases', () => {
  test('a hold never settled expires after its lease and is given back with an event', async ({
    iso,
    nc,
    start,
  }) => {
    const h = await start(config([{ window: 'day', limit: 10_000 }]));
    const id = await heldFor60s(h);
    h.clock.advance(59_999);
    expect(await h.authority.expireOverdue()).toBe(0);
    h.clock.advance(1);
    const expired = await waitFor(async () =>
      (await readEvents(nc, iso.names)).find((e) => e.type === 'reservation.expired'),
    );
    // Nobody knows how the call ended: reserve bills its worst case (onExpiry: bill).
    expect(expired).toMatchObject({
      reservationId: id,
      heldTokens: 1_000,
      chargedTokens: 1_000,
      leaseMs: 60_000,
    });
    const u = await h.client.usage({ tenant: 'team' });
    expect(u.ok && u.value.tenants[0]).toMatchObject({
      inFlight: 0,
      windows: [{ held: 0, used: 1_000 }],
    });
    // The call did finish after all: the late settle corrects the bill to its real usage.
    const late = await h.client.settle({
      reservationId: id,
      tenant: 'team',
      usage: { promptTokens: 100, completionTokens: 50 },
    });
    expect(late).toMatchObject({ ok: true, value: { status: 'settled', billedTokens: 150 } });
    expect(
      await h.client.settle({
        reservationId: id,
        tenant: 'team',
        usage: { promptTokens: 100, completionTokens: 50 },
      }),
    ).toMatchObject({
      ok: true,
      value: { status: 'already_settled' },
    });
    expect(await used(h)).toEqual([150]);
  });

  test('a settle after the expiry leaves the ledger where a settle in time would, to the micro-dollar', async ({
    start,
  }) => {
    const h = await start(config([{ window: 'day', limit: 10_000 }]));
    // 42 prompt and 136 output tokens at $0.15/$0.60 per MTok: 87.9 micro-USD, billed 88.
    const usage = { promptTokens: 42, completionTokens: 136 };
    const ledger = async () => {
      const u = await h.client.usage({ tenant: 'team' });
      if (!u.ok) throw new Error(u.error.message);
      const { billedTokens, billedMicroUsd } = u.value.tenants[0]!;
      return { tokens: billedTokens, microUsd: billedMicroUsd };
    };
    const inTime = await heldFor60s(h);
    await h.client.settle({ reservationId: inTime, tenant: 'team', usage });
    const settled = await ledger();
    expect(settled).toEqual({ tokens: 178, microUsd: 88 });
    const late = await heldFor60s(h);
    h.clock.advance(60_000);
    expect(await h.authority.expireOverdue()).toBe(1);
    // Until its settle lands the expired hold is billed at its worst case: 1,000 tokens, 555 µ$.
    expect(await ledger()).toEqual({ tokens: 178 + 1_000, microUsd: 88 + 555 });
    await h.client.settle({ reservationId: late, tenant: 'team', usage });
    expect(await ledger()).toEqual({ tokens: 2 * 178, microUsd: 2 * 88 });
  });

  test('a release that arrives after the expiry gives back what the expiry billed', async ({
    iso,
    nc,
    start,
  }) => {
    const h = await start(config([{ window: 'day', limit: 10_000 }]));
    const id = await heldFor60s(h);
    h.clock.advance(60_000);
    await waitFor(async () =>
      (await readEvents(nc, iso.names)).find((e) => e.type === 'reservation.expired'),
    );
    expect(await used(h)).toEqual([1_000]);
    // The edge never forwarded the call, but its release waited (the authority was away) until
    // after the lease: the release still bills nothing.
    const late = await h.client.release({
      reservationId: id,
      tenant: 'team',
      reason: 'admit_abandoned',
    });
    expect(late).toMatchObject({ ok: true, value: { status: 'released' } });
    expect(await used(h)).toEqual([0]);
    const released = await waitFor(async () =>
      (await readEvents(nc, iso.names)).find((e) => e.type === 'reservation.released'),
    );
    expect(released).toMatchObject({ reservationId: id, chargedTokens: -1_000 });
    expect(
      await h.client.release({ reservationId: id, tenant: 'team', reason: 'admit_abandoned' }),
    ).toMatchObject({ ok: true, value: { status: 'already_released' } });
    expect(await used(h)).toEqual([0]);
  });
});
