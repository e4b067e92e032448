import { windowCharge, type HoldfastEvent, type WindowState } from '@holdfast/events';
import { waitFor } from '@holdfast/testkit';
import { describe, expect } from 'vitest';
import { Keys } from '../src/keys.js';
import { stateKeys } from '../src/rebuild.js';
import { admissionOf, authorityTest as test, BASE_CONFIG, newId, readEvents } from './harness.js';
import { outboxesRelayed, rebuilder } from './rebuild-activity.js';
import { budgetState } from './rebuild-state.js';

/**
 * A budget removed while a call is held: close.lua gives the hold back and bills the usage on
 * every window the reservation record holds on, the removed one too. Its event lists that
 * window (`removed`, with what the close did to it), so the books (the drift audit sums
 * `w_charged` per window), the rebuild and the alerter see every window the close changed.
 * Before, the event listed only the current plan's windows: the removed one's charge was in
 * no event, and a rebuild or an audit after the budget was added back missed it.
 */

const useCases = [{ id: 'uc', maxTokens: 1_000, models: ['gpt-4o-mini'] }];
const KEY = { id: 'k1', sha256: 'a'.repeat(64) };
const DAY = { window: 'day', limit: 100_000 };

type Removed = 'team' | 'key' | 'end_user';
type Closed = Extract<
  HoldfastEvent,
  { type: 'reservation.settled' | 'reservation.released' | 'reservation.expired' }
>;

/** One team: a month budget, and a day budget of its own, of its key k1 and of its end users. */
function config(without?: Removed) {
  return {
    ...BASE_CONFIG,
    tenants: [
      {
        id: 'team',
        budgets: [{ window: 'month', limit: 100_000 }, ...(without === 'team' ? [] : [DAY])],
        keys: [{ ...KEY, budgets: without === 'key' ? [] : [DAY] }],
        endUserBudgets: without === 'end_user' ? [] : [DAY],
        useCases,
      },
    ],
  };
}

const scopeOf = (removed: Removed) => (removed === 'team' ? undefined : removed);

describe('a budget removed while a call is held', () => {
  for (const removed of ['team', 'key', 'end_user'] as const) {
    for (const op of ['settle', 'release', 'expire'] as const) {
      // reserve: the hold is 100 + 400; a settle bills 150, a release nothing, an expiry the
      // worst case.
      const billed = { settle: 150, release: 0, expire: 500 }[op];
      test(`${removed} day budget, ${op}: the close event lists its window with its charge, and the rebuild reproduces it`, async ({
        start,
        nc,
        redis,
        iso,
      }) => {
        const h = await start(config());
        const id = newId();
        admissionOf(
          await h.client.admit({
            reservationId: id,
            tenant: 'team',
            keyId: KEY.id,
            endUser: 'u1',
            useCase: 'uc',
            model: 'gpt-4o-mini',
            promptTokens: 100,
            maxTokens: 400,
            ...(op === 'expire' ? { leaseMs: 1_000 } : {}),
          }),
        );
        expect((await h.client.configApply({ document: config(removed) })).ok).toBe(true);
        if (op === 'settle') {
          expect(
            await h.client.settle({
              reservationId: id,
              tenant: 'team',
              usage: { promptTokens: 100, completionTokens: 50 },
            }),
          ).toMatchObject({ ok: true, value: { status: 'settled' } });
        } else if (op === 'release') {
          expect(
            await h.client.release({
              reservationId: id,
              tenant: 'team',
              reason: 'client_disconnected',
            }),
          ).toMatchObject({ ok: true, value: { status: 'released' } });
        } else {
          await waitFor(() => h.authority.relayedOrgs.includes('team'), { what: 'relay lease' });
          h.clock.advance(1_000);
          expect(await h.authority.expireOverdue()).toBe(1);
        }
        const keys = new Keys(iso.keyPrefix);
        await outboxesRelayed(redis, keys);
        const type = `reservation.${op === 'settle' ? 'settled' : `${op}d`}`;
        const closed = await waitFor(async () =>
          (await readEvents(nc, iso.names)).find((e): e is Closed => e.type === type),
        );
        const day = (w: WindowState) => w.budget === 'day-tokens' && w.scope === scopeOf(removed);
        // Every window the hold was on is listed once; the removed one says so, with no limit.
        const listed = closed.windows.map((w) => `${w.scope ?? 'team'}/${w.budget}`);
        expect(listed.sort()).toEqual([
          'end_user/day-tokens',
          'key/day-tokens',
          'team/day-tokens',
          'team/month-tokens',
        ]);
        const gone = closed.windows.find(day);
        expect(gone).toMatchObject({
          used: billed,
          held: 0,
          limit: 0,
          enforce: false,
          removed: true,
        });
        expect(windowCharge(closed, gone!)).toBe(billed);
        for (const w of closed.windows.filter((x) => !day(x))) expect(w.removed).toBeUndefined();

        // Added back: the window holds what the close billed it, as the event says.
        const now = h.clock.now;
        expect((await h.client.configApply({ document: config() })).ok).toBe(true);
        const u = await h.client.usage({ tenant: 'team', endUser: 'u1' });
        const t = u.ok ? u.value.tenants[0]! : undefined;
        const all = [
          ...(t?.windows ?? []),
          ...(t?.keys.flatMap((k) => k.windows) ?? []),
          ...(t?.endUsers.flatMap((e) => e.windows) ?? []),
        ];
        // A release leaves u1, whom its admission tracked, nothing: forgotten with its windows.
        if (removed === 'end_user' && op === 'release') expect(all.find(day)).toBeUndefined();
        else expect(all.find(day)).toMatchObject({ used: billed, held: 0 });

        // Lost and rebuilt from the events: the same state, key by key.
        await outboxesRelayed(redis, keys);
        await h.stop();
        const before = await budgetState(redis, keys, now);
        await redis.del(...(await stateKeys(redis, keys)));
        await rebuilder({ redis, nc, names: iso.names, keys, now, config: config() }).run();
        expect(await budgetState(redis, keys, now)).toEqual(before);
      });
    }
  }
});
