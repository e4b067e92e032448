import { describe, expect } from 'vitest';
import { Keys } from '../src/keys.js';
import { stateKeys } from '../src/rebuild.js';
import {
  admissionOf,
  applyOnAnotherReplica,
  authorityTest as test,
  BASE_CONFIG,
  newId,
  readEvents,
  refusalOf,
} from './harness.js';
import type { TestAuthority } from '../src/testing.js';
import { outboxesRelayed, rebuilder } from './rebuild-activity.js';
import { budgetState } from './rebuild-state.js';
import { waitFor } from '@holdfast/testkit';

const config = (budget: Record<string, unknown>) => ({
  ...BASE_CONFIG,
  tenants: [
    {
      id: 'team',
      mode: 'adaptive',
      adaptive: { percentile: 0.95, minSamples: 5, samples: 50 },
      budgets: [{ window: 'day', ...budget }],
      useCases: [{ id: 'uc', maxTokens: 1_000, models: ['gpt-4o-mini'] }],
    },
  ],
});

const call = (extensible: boolean, maxTokens = 1_000) => ({
  reservationId: newId(),
  tenant: 'team',
  keyId: null,
  useCase: 'uc',
  model: 'gpt-4o-mini',
  promptTokens: 100,
  maxTokens,
  extensible,
});

/** Settles five calls of 100 prompt + `completion` output, so the estimate has samples. */
async function learn(h: TestAuthority, completion: number) {
  for (let i = 0; i < 5; i++) {
    const c = admissionOf(await h.client.admit(call(true)));
    await h.client.settle({
      reservationId: c.reservationId,
      tenant: 'team',
      usage: { promptTokens: 100, completionTokens: completion },
    });
  }
}

/** Settles each call at 100 prompt + `completion` output. */
async function settleAll(h: TestAuthority, calls: { reservationId: string }[], completion: number) {
  for (const c of calls)
    await h.client.settle({
      reservationId: c.reservationId,
      tenant: 'team',
      usage: { promptTokens: 100, completionTokens: completion },
    });
}

/** The team's day window. */
async function dayWindow(h: TestAuthority) {
  const u = await h.client.usage({ tenant: 'team' });
  if (!u.ok) throw new Error(u.error.message);
  return u.value.tenants[0]!.windows[0]!;
}

describe('adaptive mode', () => {
  test('holds prompt + max_tokens until it has samples, then prompt + the recent p95 of real output', async ({
    start,
  }) => {
    const h = await start(config({ limit: 100_000 }));
    expect(admissionOf(await h.client.admit(call(true)))).toMatchObject({
      heldTokens: 1_100,
      coveredOutputTokens: 1_000,
    });
    await learn(h, 200);
    expect(admissionOf(await h.client.admit(call(true)))).toMatchObject({
      heldTokens: 300,
      coveredOutputTokens: 200,
      maxTokens: 1_000,
    });
  });

  test('a hold grows as output arrives while the window has room, and is refused when it has not', async ({
    start,
    nc,
    iso,
  }) => {
    const h = await start(config({ limit: 8_000 }));
    await learn(h, 200); // 1,500 billed
    const a = admissionOf(await h.client.admit(call(true)));
    expect(a.heldTokens).toBe(300);
    const grown = await h.client.extend({
      reservationId: a.reservationId,
      tenant: 'team',
      outputTokens: 600,
    });
    expect(grown).toMatchObject({
      ok: true,
      value: { status: 'extended', heldTokens: 700, coveredOutputTokens: 600 },
    });
    expect(grown.ok && grown.value.windows[0]).toMatchObject({ used: 1_500, held: 700 });
    // Asking again for what is covered changes nothing; asking past max_tokens is capped.
    expect(
      await h.client.extend({ reservationId: a.reservationId, tenant: 'team', outputTokens: 400 }),
    ).toMatchObject({ ok: true, value: { status: 'unchanged' } });
    expect(
      await h.client.extend({
        reservationId: a.reservationId,
        tenant: 'team',
        outputTokens: 5_000,
      }),
    ).toMatchObject({
      ok: true,
      value: { status: 'extended', coveredOutputTokens: 1_000, heldTokens: 1_100 },
    });
    // Fill the window with other holds: the next growth does not fit.
    const others = [];
    for (let i = 0; i < 17; i++) others.push(admissionOf(await h.client.admit(call(true)))); // 17 × 300 = 5,100
    const b = admissionOf(await h.client.admit(call(true)));
    expect(
      await h.client.extend({ reservationId: b.reservationId, tenant: 'team', outputTokens: 600 }),
    ).toMatchObject({ ok: true, value: { status: 'refused', heldTokens: 300 } });
    // The call ends at what it was allowed; settle releases the whole grown hold.
    const s = await h.client.settle({
      reservationId: a.reservationId,
      tenant: 'team',
      usage: { promptTokens: 100, completionTokens: 900 },
      outcome: 'budget_exhausted',
    });
    expect(s.ok && s.value.windows[0]).toMatchObject({ used: 2_500, held: 18 * 300 });
    const extended = await waitFor(async () => {
      const e = (await readEvents(nc, iso.names)).filter((x) => x.type === 'reservation.extended');
      return e.length === 2 ? e : undefined;
    });
    expect(extended[0]).toMatchObject({
      addedTokens: 400,
      coveredOutputTokens: 600,
      heldTokens: 700,
    });
    expect(
      await h.client.extend({ reservationId: a.reservationId, tenant: 'team', outputTokens: 999 }),
    ).toMatchObject({ ok: true, value: { status: 'closed' } });
  });

  test('a growth only part of which fits is granted in part', async ({ start }) => {
    const h = await start(config({ limit: 100_000 }));
    await learn(h, 200); // 1,500 billed, the estimate is 200
    expect((await h.client.configApply({ document: config({ limit: 2_000 }) })).ok).toBe(true);
    const a = admissionOf(await h.client.admit(call(true))); // holds 300: 200 tokens of room left
    expect(
      await h.client.extend({
        reservationId: a.reservationId,
        tenant: 'team',
        outputTokens: 1_000,
      }),
    ).toMatchObject({
      ok: true,
      value: { status: 'extended', coveredOutputTokens: 400, heldTokens: 500 },
    });
    expect(
      await h.client.extend({
        reservationId: a.reservationId,
        tenant: 'team',
        outputTokens: 1_000,
      }),
    ).toMatchObject({
      ok: true,
      value: { status: 'refused', coveredOutputTokens: 400 },
    });
  });

  test('calls whose hold cannot grow are admitted only while every possible overrun fits the debt bound', async ({
    start,
  }) => {
    // limit 3,000 + debt 1,000. After learning, each call holds 300 and may overrun by 800.
    const h = await start(config({ limit: 3_000, debt: 1_000 }));
    await learn(h, 200); // used 1,500
    // 1,500 + 300 + 800 = 2,600 ≤ 4,000: admitted; the second: 1,500 + 600 + 1,600 = 3,700: admitted.
    const a = admissionOf(await h.client.admit(call(false)));
    const b = admissionOf(await h.client.admit(call(false)));
    expect([a.heldTokens, b.heldTokens]).toEqual([300, 300]);
    // A third could overrun to 4,800: refused although its estimate alone would fit.
    expect(refusalOf(await h.client.admit(call(false))).code).toBe('budget_exceeded');
    // Both overrun to the full max_tokens: billed stays within limit + debt.
    await settleAll(h, [a, b], 1_000);
    const w = await dayWindow(h);
    expect(w).toMatchObject({ used: 3_700, held: 0 });
    expect(w.used).toBeLessThanOrEqual(3_000 + 1_000);
    // The debt blocks the next admission until the window frees it.
    expect(refusalOf(await h.client.admit(call(true, 10))).code).toBe('budget_exceeded');
  });
});

/**
 * Holds that grow while an admin changes the tenant's plan under them: a hold grows only past
 * windows whose limits it can check (extend.lua). A window the call holds nothing on (a budget
 * added since admission) is billed the call's whole usage at settle, and a window of a parent
 * the tenant left is still limited: growing past either bills it over its limit unseen.
 */
describe('adaptive holds under an admin change', () => {
  const changed = (team: Record<string, unknown>, others: Record<string, unknown>[] = []) => {
    const base = config({ limit: 100_000 });
    return { ...base, tenants: [...others, { ...base.tenants[0], ...team }] };
  };

  /** Asks c's hold to cover 1,000 output: refused, it stays 110; then settles 110. */
  async function growRefusedThenSettle(h: TestAuthority, reservationId: string) {
    const grown = await h.client.extend({ reservationId, tenant: 'team', outputTokens: 1_000 });
    expect(grown).toMatchObject({ ok: true, value: { status: 'refused', heldTokens: 110 } });
    await h.client.settle({
      reservationId,
      tenant: 'team',
      usage: { promptTokens: 100, completionTokens: 10 },
    });
  }

  async function windows(h: TestAuthority, tenant: string) {
    const u = await h.client.usage({ tenant });
    if (!u.ok) throw new Error(u.error.message);
    const t = u.value.tenants.find((x) => x.tenant === tenant)!;
    return Object.fromEntries(t.windows.map((w) => [w.budget, [w.used, w.held, w.limit]]));
  }

  test('a budget added while a call streams: its hold does not grow past the new limit', async ({
    start,
  }) => {
    const h = await start(changed({}));
    await learn(h, 10);
    const c = admissionOf(await h.client.admit(call(true)));
    expect(c).toMatchObject({ heldTokens: 110, coveredOutputTokens: 10 });
    const minute = { window: 'minute', limit: 300 };
    const added = changed({ budgets: [{ window: 'day', limit: 100_000 }, minute] });
    expect((await h.client.configApply({ document: added })).ok).toBe(true);
    // Before, the hold grew to 1,100, and its settle billed the minute window 1,100 of 300.
    await growRefusedThenSettle(h, c.reservationId);
    expect((await windows(h, 'team'))['minute-tokens']).toEqual([110, 0, 300]);
  });

  test('a team moved under another parent of its org while a call streams: its hold does not grow past the parent it left', async ({
    start,
  }) => {
    const uc = config({ limit: 0 }).tenants[0]!.useCases;
    const parents = (divA: number) => [
      { id: 'acme', useCases: uc },
      { id: 'div-a', parent: 'acme', budgets: [{ window: 'day', limit: divA }], useCases: uc },
      { id: 'div-b', parent: 'acme', budgets: [{ window: 'day', limit: 100_000 }], useCases: uc },
    ];
    const h = await start(changed({ parent: 'div-a' }, parents(2_000)));
    await learn(h, 10);
    const c = admissionOf(await h.client.admit(call(true)));
    expect(await windows(h, 'div-a')).toEqual({ 'day-tokens': [550, 110, 2_000] });
    // The team moves to div-b, and div-a's limit is lowered to what it has spent and holds.
    const moved = await h.client.configApply({
      document: changed({ parent: 'div-b' }, parents(660)),
    });
    expect(moved.ok).toBe(true);
    // Before, the hold grew to 1,100 unchecked, and div-a was billed 1,650 of its 660.
    await growRefusedThenSettle(h, c.reservationId);
    expect(await windows(h, 'div-a')).toEqual({ 'day-tokens': [660, 0, 660] });
  });

  test('a limit lowered on another replica (notice not heard): a hold grows as the edge on the new version knows it', async ({
    start,
    iso,
  }) => {
    const h = await start(changed({}));
    await learn(h, 10); // used 550
    const c = admissionOf(await h.client.admit(call(true))); // holds 110
    // Another replica applies the admin's change; this one serves version 1 until its poll.
    const lowered = changed({ budgets: [{ window: 'day', limit: 700 }] });
    expect(await applyOnAnotherReplica(h, iso.keyPrefix, lowered)).toBe(2);
    expect(h.authority.ctx.config.version).toBe(1);
    // 40 tokens of room are left under 700: before, the hold grew to 1,100 under the old limit.
    const grown = await h.client.extend({
      reservationId: c.reservationId,
      tenant: 'team',
      outputTokens: 1_000,
      configVersion: 2,
    });
    expect(grown).toMatchObject({
      ok: true,
      value: { status: 'extended', heldTokens: 150, coveredOutputTokens: 50 },
    });
    expect(h.authority.ctx.config.version).toBe(2);
  });
});

for (const later of ['extensible', 'reserve'] as const) {
  test(`what a call whose hold cannot grow may still overrun is kept from ${later === 'reserve' ? 'reserve calls after the team is switched to reserve' : 'calls whose hold can grow'}: billed stays within the limit`, async ({
    start,
  }) => {
    const h = await start(config({ limit: 10_000 }));
    await learn(h, 100); // used 1,000, the estimate is 100
    // Held 200, may overrun by 900: 1,000 + 200 + 900 + 1,100 fits 10,000.
    const x = admissionOf(await h.client.admit(call(false)));
    if (later === 'reserve') {
      const reserve = config({ limit: 10_000 });
      reserve.tenants[0]!.mode = 'reserve';
      expect((await h.client.configApply({ document: reserve })).ok).toBe(true);
    }
    // Calls of 200 (prompt 100 + 100 output), admitted while they fit.
    const others = [];
    for (let i = 0; i < 60; i++) {
      const r = await h.client.admit(call(true, 100));
      if (!r.ok || !r.value.admitted) break;
      others.push(r.value);
    }
    // Before, 44 were: their holds filled the room x may still overrun into.
    expect(others).toHaveLength(39);
    await settleAll(h, [x], 1_000);
    await settleAll(h, others, 100);
    const w = await dayWindow(h);
    expect(w).toMatchObject({ used: 1_000 + 1_100 + 39 * 200, held: 0 });
    expect(w.used).toBeLessThanOrEqual(10_000);
  });
}

/**
 * A budget removed while an adaptive call streams: the hold is still on its window (a settle
 * gives the hold back and bills it there), and nothing limits it any more, so the hold grows
 * (extend.lua refuses only windows it cannot check that still have a limit). The growth is held
 * on the removed window too, and the `reservation.extended` event lists that window as a close
 * does (`removed`, limit 0, enforce false, its state after the growth): every window the
 * extension changed is in its event. Before, the event listed only the plan's windows.
 */
describe('an adaptive hold on a budget removed while it streams', () => {
  const KEY = { id: 'k1', sha256: 'a'.repeat(64) };
  const DAY = { window: 'day', limit: 100_000 };
  type Removed = 'team' | 'key' | 'end_user';
  const removedConfig = (without?: Removed) => {
    const base = config({ limit: 100_000 });
    return {
      ...base,
      tenants: [
        {
          ...base.tenants[0],
          budgets: [{ window: 'month', limit: 100_000 }, ...(without === 'team' ? [] : [DAY])],
          keys: [{ ...KEY, budgets: without === 'key' ? [] : [DAY] }],
          endUserBudgets: without === 'end_user' ? [] : [DAY],
        },
      ],
    };
  };
  const named = { ...call(true), keyId: KEY.id, endUser: 'u1' };

  for (const removed of ['team', 'key', 'end_user'] as const) {
    test(`${removed} day budget: the hold grows, and the extended event lists the removed window with its hold`, async ({
      start,
      nc,
      redis,
      iso,
    }) => {
      const h = await start(removedConfig());
      for (let i = 0; i < 5; i++) {
        const c = admissionOf(await h.client.admit({ ...named, reservationId: newId() }));
        await h.client.settle({
          reservationId: c.reservationId,
          tenant: 'team',
          usage: { promptTokens: 100, completionTokens: 10 },
        });
      }
      const c = admissionOf(await h.client.admit({ ...named, reservationId: newId() }));
      expect(c).toMatchObject({ heldTokens: 110, coveredOutputTokens: 10 });
      expect((await h.client.configApply({ document: removedConfig(removed) })).ok).toBe(true);
      const ask = { reservationId: c.reservationId, tenant: 'team', keyId: KEY.id, endUser: 'u1' };
      const grown = await h.client.extend({ ...ask, outputTokens: 1_000 });
      expect(grown.ok && [grown.value.status, grown.value.heldTokens]).toEqual(['extended', 1_100]);

      const keys = new Keys(iso.keyPrefix);
      await outboxesRelayed(redis, keys);
      const extended = await waitFor(async () =>
        (await readEvents(nc, iso.names)).find((e) => e.type === 'reservation.extended'),
      );
      if (extended?.type !== 'reservation.extended') throw new Error('no extended event');
      // Every window the hold is on, once: the plan's three, then the removed one, with no
      // limit; the learning calls billed each 5 × 110, and the grown hold is on each.
      const scope = removed === 'team' ? undefined : removed;
      const names = new Set(extended.windows.map((w) => `${w.scope}/${w.budget}`));
      expect([names.size, extended.windows.length]).toEqual([4, 4]);
      expect(extended.windows.at(-1)).toEqual({
        tenant: 'team',
        budget: 'day-tokens',
        window: 'day',
        unit: 'tokens',
        limit: 0,
        used: 550,
        held: 1_100,
        enforce: false,
        ...(scope ? { scope, subject: scope === 'key' ? KEY.id : expect.any(String) } : {}),
        removed: true,
      });
      for (const w of extended.windows.slice(0, -1)) {
        expect(w).toMatchObject({ used: 550, held: 1_100 });
        expect(w.removed).toBeUndefined();
      }
      expect(grown.ok && grown.value.windows).toEqual(extended.windows);

      // Lost while the call streams, and rebuilt from the events: the same state, key by key.
      const now = h.clock.now;
      await h.stop();
      const before = await budgetState(redis, keys, now);
      await redis.del(...(await stateKeys(redis, keys)));
      await rebuilder({
        redis,
        nc,
        names: iso.names,
        keys,
        now,
        config: removedConfig(removed),
      }).run();
      expect(await budgetState(redis, keys, now)).toEqual(before);
    });
  }
});

/**
 * A call the edge retries after an attempt that failed inside its stream and billed its prompt
 * (ExtendRequest.billed): the hold grows by that bill on every window it is on (the team's,
 * its key's, its end user's, its parent's), all or nothing, whatever output it covers (a reserve hold covers
 * its max_tokens already), so the settle of both attempts is no overrun.
 */
describe('a hold grown by what a failed attempt billed', () => {
  const KEY = { id: 'k1', sha256: 'b'.repeat(64) };
  const reserve = (limit: number, parentLimit: number) => ({
    ...BASE_CONFIG,
    tenants: [
      { id: 'org', mode: 'reserve', budgets: [{ window: 'day', limit: parentLimit }] },
      {
        id: 'team',
        parent: 'org',
        mode: 'reserve',
        budgets: [{ window: 'day', limit }],
        keys: [{ ...KEY, budgets: [{ window: 'day', limit }] }],
        endUserBudgets: [{ window: 'day', limit }],
        useCases: [{ id: 'uc', maxTokens: 1_000, models: ['gpt-4o-mini'] }],
      },
    ],
  });
  const named = { ...call(false, 200), keyId: KEY.id, endUser: 'u1' };

  test('grows on every window when each has room; refused, nothing changed, when one has not', async ({
    start,
  }) => {
    const h = await start(reserve(1_000, 450));
    const c = admissionOf(await h.client.admit(named));
    expect(c).toMatchObject({ mode: 'reserve', heldTokens: 300, coveredOutputTokens: 200 });
    const ask = { reservationId: c.reservationId, tenant: 'team', outputTokens: 200 };
    // Not naming the key and end user: the authority finds them on the hold.
    const grown = await h.client.extend({ ...ask, billed: { promptTokens: 100, outputTokens: 1 } });
    expect(grown).toMatchObject({
      ok: true,
      value: { status: 'extended', heldTokens: 401, coveredOutputTokens: 200 },
    });
    expect(grown.ok && grown.value.heldMicroUsd).toBeGreaterThan(c.heldMicroUsd);
    // The parent's window has 49 left: a second bill of 100 does not fit, on any window.
    const refused = await h.client.extend({
      ...ask,
      keyId: KEY.id,
      endUser: 'u1',
      billed: { promptTokens: 100, outputTokens: 0 },
    });
    expect(refused).toMatchObject({ ok: true, value: { status: 'refused', heldTokens: 401 } });
    const u = await h.client.usage({ tenant: 'team' });
    if (!u.ok) throw new Error(u.error.message);
    const t = u.value.tenants[0]!;
    const windows = [...t.windows, ...t.keys.flatMap((k) => k.windows)];
    expect(windows.map((w) => [w.tenant, w.held])).toEqual([
      ['team', 401],
      ['org', 401],
      ['team', 401],
    ]);
    // Both attempts settled together (the failed one's 101, the answer's 300): no overrun.
    const s = await h.client.settle({
      reservationId: c.reservationId,
      tenant: 'team',
      usage: { promptTokens: 200, completionTokens: 201 },
    });
    expect(s.ok && s.value.windows.map((w) => [w.used, w.held])).toEqual(
      Array.from({ length: 4 }, () => [401, 0]),
    );
    const after = await h.client.usage({ tenant: 'team' });
    expect(after.ok && after.value.tenants[0]!.overruns.count).toBe(0);
  });
});
