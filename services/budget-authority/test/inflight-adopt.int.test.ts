import { describe, expect } from 'vitest';
import { Keys } from '../src/keys.js';
import { stateKeys } from '../src/rebuild.js';
import { outboxesRelayed, rebuilder } from './rebuild-activity.js';
import { budgetState } from './rebuild-state.js';
import { admissionOf, BASE_CONFIG, miniCall, refusalOf, authorityTest as test } from './harness.js';

/**
 * SPEC §4: in reserve mode no window's billed usage exceeds its limit. A window the calls in
 * flight hold nothing on (a budget added, its unit or window kind changed, the tenant switched
 * to reserve, while they run) is billed their whole usage when they settle: an admission must
 * see their worst case there, so none is admitted into room they will use. A rebuild from the
 * events holds them there too, and their closes after it give those holds back.
 */

const MONTH = { window: 'month', limit: 10_000_000 };
const useCases = [{ id: 'uc', maxTokens: 1_000, models: ['gpt-4o-mini'] }];
// gpt-4o-mini: 100 prompt + 1,000 output tokens cost 15 + 600 micro-USD (limits: USD).
const CALL_T = 1_100;
const CALL_U = 615;

/** The team under `acme`, which has `parent` as budgets (a month's alone by default). */
function config(mode: string, budgets: Record<string, unknown>[], parent = [MONTH]) {
  return {
    ...BASE_CONFIG,
    tenants: [
      { id: 'acme', budgets: parent },
      // onExpiry set: a rebuild writes a record's expB from the current config, not the mode
      // it was admitted in.
      { id: 'team', parent: 'acme', mode, onExpiry: 'release', maxInFlight: 64, budgets, useCases },
    ],
  };
}

const call = () => ({ ...miniCall(100, 1_000), tenant: 'team', useCase: 'uc' });

const cases = [
  {
    name: 'a minute budget added',
    before: config('reserve', [MONTH]),
    after: config('reserve', [MONTH, { window: 'minute', limit: 2_200 }]),
    budget: 'minute-tokens',
    each: CALL_T,
    limit: 2_200,
  },
  {
    name: "a minute budget added to the team's parent",
    before: config('reserve', [MONTH]),
    after: config('reserve', [MONTH], [MONTH, { window: 'minute', limit: 2_200 }]),
    level: 'acme',
    budget: 'minute-tokens',
    each: CALL_T,
    limit: 2_200,
  },
  {
    name: 'a minute budget switched from tokens to usd',
    before: config('reserve', [MONTH, { window: 'minute', limit: 10_000_000 }]),
    after: config('reserve', [MONTH, { window: 'minute', limit: 0.001353, unit: 'usd' }]),
    budget: 'minute-usd',
    each: CALL_U,
    limit: 1_353,
  },
  {
    name: 'the mode switched from post to reserve',
    before: config('post', [MONTH, { window: 'minute', limit: 2_200 }]),
    after: config('reserve', [MONTH, { window: 'minute', limit: 2_200 }]),
    budget: 'minute-tokens',
    each: CALL_T,
    limit: 2_200,
  },
];

describe('calls in flight on a window they hold nothing on', () => {
  for (const c of cases) {
    test(`${c.name}: no admission while the calls in flight cover its limit, rebuilt alike`, async ({
      start,
      nc,
      redis,
      iso,
    }) => {
      const first = await start(c.before);
      const early = Array.from({ length: 16 }, call);
      for (const x of early) admissionOf(await first.client.admit(x));
      expect((await first.client.configApply({ document: c.after })).ok).toBe(true);
      const later = Array.from({ length: 4 }, call);
      for (const x of later) {
        const r = refusalOf(await first.client.admit(x));
        expect(r.code).toBe('budget_exceeded');
      }

      // Lost and rebuilt from the events while the 16 are in flight: the same state.
      const keys = new Keys(iso.keyPrefix);
      await outboxesRelayed(redis, keys);
      const now = first.clock.now;
      await first.stop();
      const before = await budgetState(redis, keys, now);
      await redis.del(...(await stateKeys(redis, keys)));
      await rebuilder({ redis, nc, names: iso.names, keys, now, config: c.after }).run();
      expect(await budgetState(redis, keys, now)).toEqual(before);

      const h = await start(c.after);
      refusalOf(await h.client.admit(call()));
      const usage = { promptTokens: 100, completionTokens: 1_000 };
      const settled = await Promise.all(
        early.map(({ reservationId }) => h.client.settle({ reservationId, tenant: 'team', usage })),
      );
      expect(settled.every((r) => r.ok && r.value.status === 'settled')).toBe(true);
      const u = await h.client.usage({ tenant: 'team' });
      const w = u.ok
        ? u.value.tenants[0]!.windows.find(
            (x) => x.budget === c.budget && x.tenant === (c.level ?? 'team'),
          )
        : undefined;
      expect(w).toMatchObject({ held: 0 });
      expect(w!.used - 16 * c.each).toBeLessThanOrEqual(c.limit);
    });
  }
});
