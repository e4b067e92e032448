import { infraTest as test, waitFor } from '@holdfast/testkit';
import { describe, expect } from 'vitest';
import type { TestAuthority } from '../src/testing.js';
import { loadKeyChecked } from './declared-keys.js';
import { admissionOf, BASE_CONFIG, newId, onPrivateRedis } from './harness.js';

/**
 * Every key a script touches is declared in its KEYS. On Redis Cluster an undeclared key
 * works only while its slot (the org's hash tag) is the declared keys' and is served there:
 * during the slot's migration the script fails at that key with earlier writes applied (a
 * hold leaked, a window billed without its event). Redis checks only the slot, so these
 * tests run the authority on a library whose redis.call fails on any key not in KEYS
 * (declared-keys.ts), on a Redis of the test's own, through each path of close, renew and
 * admit.
 */

const useCases = [{ id: 'uc', maxTokens: 1_000, models: ['gpt-4o-mini'] }];
const KEY = { id: 'k1', sha256: 'a'.repeat(64) };
const DAY = { window: 'day', limit: 100_000 };

interface TeamOptions {
  mode?: 'reserve' | 'adaptive' | 'post';
  teamDay?: boolean;
  keyDay?: boolean;
  endUserDay?: boolean;
  keyMaxEndUsers?: number;
}

/** One team: a month budget, and (unless told otherwise) day budgets of its own, of its key k1 and of its end users. */
function config(o: TeamOptions = {}) {
  return {
    ...BASE_CONFIG,
    tenants: [
      {
        id: 'team',
        ...(o.mode === 'adaptive'
          ? {
              mode: 'adaptive',
              adaptive: { percentile: 0.95, minSamples: 5, samples: 50 },
            }
          : o.mode === 'post'
            ? { mode: 'post' }
            : {}),
        budgets: [{ window: 'month', limit: 100_000 }, ...(o.teamDay === false ? [] : [DAY])],
        keys: [
          {
            ...KEY,
            budgets: o.keyDay === false ? [] : [DAY],
            ...(o.keyMaxEndUsers ? { maxEndUsers: o.keyMaxEndUsers } : {}),
          },
        ],
        endUserBudgets: o.endUserDay === false ? [] : [DAY],
        useCases,
      },
    ],
  };
}

/** team under `parent` (dept1 or dept2, both under acme), each level with a day budget. */
function moved(parent: 'dept1' | 'dept2') {
  return {
    ...BASE_CONFIG,
    tenants: [
      { id: 'acme', budgets: [DAY] },
      { id: 'dept1', parent: 'acme', budgets: [DAY] },
      { id: 'dept2', parent: 'acme', budgets: [DAY] },
      { id: 'team', parent, budgets: [DAY], useCases },
    ],
  };
}

const call = (extra: Record<string, unknown> = {}) => ({
  reservationId: newId(),
  tenant: 'team',
  keyId: KEY.id,
  endUser: 'u1',
  useCase: 'uc',
  model: 'gpt-4o-mini',
  promptTokens: 100,
  maxTokens: 400,
  ...extra,
});

const settleOf = (id: string, completionTokens = 50) => ({
  reservationId: id,
  tenant: 'team',
  keyId: KEY.id,
  endUser: 'u1',
  usage: { promptTokens: 100, completionTokens },
});

describe('every key a script touches is declared', () => {
  /** A test whose authority runs on a Redis of its own, with the key-checked library. */
  function checkedTest(name: string, cfg: unknown, run: (h: TestAuthority) => Promise<void>) {
    test(name, async ({ nc, natsUrl, iso }) => {
      const { server, h, admin } = await onPrivateRedis({ nc, natsUrl, iso }, { config: cfg });
      try {
        await loadKeyChecked(admin);
        await run(h);
      } finally {
        await h.stop();
        admin.disconnect();
        await server.stop();
      }
    });
  }

  checkedTest(
    'settle of an adaptive call on its own plan (its output samples)',
    config({ mode: 'adaptive' }),
    async (h) => {
      const c = call();
      admissionOf(await h.client.admit(c));
      expect(await h.client.settle(settleOf(c.reservationId))).toMatchObject({
        ok: true,
        value: { status: 'settled' },
      });
    },
  );

  checkedTest(
    'release of a new end user’s call that billed nothing (the end user forgotten)',
    config(),
    async (h) => {
      const c = call();
      admissionOf(await h.client.admit(c));
      expect(
        await h.client.release({
          reservationId: c.reservationId,
          tenant: 'team',
          keyId: KEY.id,
          endUser: 'u1',
          reason: 'client_disconnected',
        }),
      ).toMatchObject({ ok: true, value: { status: 'released' } });
    },
  );

  for (const removed of ['teamDay', 'keyDay', 'endUserDay'] as const) {
    checkedTest(
      `settle with an overrun after the ${removed} budget was removed (the record's windows and levels)`,
      config(),
      async (h) => {
        const c = call();
        admissionOf(await h.client.admit(c));
        expect((await h.client.configApply({ document: config({ [removed]: false }) })).ok).toBe(
          true,
        );
        expect(await h.client.settle(settleOf(c.reservationId, 900))).toMatchObject({
          ok: true,
          value: { status: 'settled', overrunTokens: 500 },
        });
      },
    );
  }

  checkedTest(
    'extend of an adaptive hold after its team day budget was removed (the record’s windows)',
    config({ mode: 'adaptive' }),
    async (h) => {
      // Five calls' output sizes (minSamples): the next hold is their estimate, and grows.
      for (let i = 0; i < 5; i++) {
        const c = call();
        admissionOf(await h.client.admit(c));
        await h.client.settle(settleOf(c.reservationId, 10));
      }
      const c = call({ extensible: true });
      admissionOf(await h.client.admit(c));
      expect(
        (await h.client.configApply({ document: config({ mode: 'adaptive', teamDay: false }) })).ok,
      ).toBe(true);
      const grown = await h.client.extend({
        reservationId: c.reservationId,
        tenant: 'team',
        keyId: KEY.id,
        endUser: 'u1',
        outputTokens: 1_000,
      });
      expect(grown).toMatchObject({ ok: true, value: { status: 'extended' } });
    },
  );

  checkedTest(
    'settle after an end-user budget was added (the end user registered)',
    config({ endUserDay: false }),
    async (h) => {
      const c = call();
      admissionOf(await h.client.admit(c));
      expect((await h.client.configApply({ document: config() })).ok).toBe(true);
      expect(await h.client.settle(settleOf(c.reservationId))).toMatchObject({
        ok: true,
        value: { status: 'settled' },
      });
    },
  );

  checkedTest('expiry by the sweeper of a key’s and end user’s hold', config(), async (h) => {
    admissionOf(await h.client.admit(call({ leaseMs: 1_000 })));
    await waitFor(() => h.authority.relayedOrgs.includes('team'), { what: 'relay lease' });
    h.clock.advance(1_000);
    expect(await h.authority.expireOverdue()).toBe(1);
  });

  checkedTest(
    'expiry by the sweeper after the team left the config (the record alone)',
    config(),
    async (h) => {
      admissionOf(await h.client.admit(call({ leaseMs: 1_000 })));
      await waitFor(() => h.authority.relayedOrgs.includes('team'), { what: 'relay lease' });
      expect(
        (await h.client.configApply({ document: { ...BASE_CONFIG, tenants: BASE_CONFIG.tenants } }))
          .ok,
      ).toBe(true);
      h.clock.advance(1_000);
      expect(await h.authority.expireOverdue()).toBe(1);
    },
  );

  for (const op of ['settle', 'expire', 'renew'] as const) {
    checkedTest(
      `${op} of a team's hold after the team moved under another department (the record's levels)`,
      moved('dept1'),
      async (h) => {
        const c = call({ keyId: null, endUser: undefined, leaseMs: 1_000 });
        admissionOf(await h.client.admit(c));
        expect((await h.client.configApply({ document: moved('dept2') })).ok).toBe(true);
        if (op === 'settle') {
          expect(
            await h.client.settle({
              ...settleOf(c.reservationId),
              keyId: null,
              endUser: undefined,
            }),
          ).toMatchObject({ ok: true, value: { status: 'settled' } });
        } else if (op === 'renew') {
          expect(
            await h.client.renew({ reservationId: c.reservationId, tenant: 'team', org: 'acme' }),
          ).toMatchObject({ ok: true, value: { status: 'renewed' } });
        } else {
          await waitFor(() => h.authority.relayedOrgs.includes('acme'), { what: 'relay lease' });
          h.clock.advance(1_000);
          expect(await h.authority.expireOverdue()).toBe(1);
        }
      },
    );
  }

  checkedTest(
    'renew of a team’s live hold (its levels’ in-flight sets)',
    moved('dept1'),
    async (h) => {
      const c = call({ keyId: null, endUser: undefined });
      admissionOf(await h.client.admit(c));
      expect(
        await h.client.renew({ reservationId: c.reservationId, tenant: 'team', org: 'acme' }),
      ).toMatchObject({ ok: true, value: { status: 'renewed' } });
    },
  );

  checkedTest(
    'usage of a team with an end user (its registry, counted with the windows)',
    config(),
    async (h) => {
      admissionOf(await h.client.admit(call()));
      for (const endUser of [undefined, 'u1']) {
        const u = await h.client.usage({ tenant: 'team', ...(endUser ? { endUser } : {}) });
        expect(u.ok && u.value.tenants[0]).toMatchObject({ inFlight: 1, endUserCount: 1 });
      }
    },
  );

  checkedTest('renew of a live hold (its levels’ in-flight sets)', config(), async (h) => {
    const c = call();
    admissionOf(await h.client.admit(c));
    expect(
      await h.client.renew({ reservationId: c.reservationId, tenant: 'team', org: 'team' }),
    ).toMatchObject({ ok: true, value: { status: 'renewed' } });
  });
  // admit's adoption walk (admit.lua adopt, adoptOwn): the first admission after a change
  // reads and writes the records of the calls in flight, and the windows they are held on.
  for (const [added, before] of [
    ['a team day budget', { teamDay: false }],
    ['a key day budget', { keyDay: false }],
  ] as const) {
    checkedTest(
      `admission after ${added} was added while a call is in flight (the record)`,
      config(before),
      async (h) => {
        admissionOf(await h.client.admit(call()));
        expect((await h.client.configApply({ document: config() })).ok).toBe(true);
        admissionOf(await h.client.admit(call()));
      },
    );
  }

  checkedTest(
    'admission after the switch from post to reserve while a call is in flight (its windows)',
    config({ mode: 'post' }),
    async (h) => {
      admissionOf(await h.client.admit(call()));
      admissionOf(await h.client.admit(call({ endUser: 'u2' })));
      expect((await h.client.configApply({ document: config() })).ok).toBe(true);
      admissionOf(await h.client.admit(call({ keyId: null, endUser: undefined })));
    },
  );

  checkedTest(
    "admission after end-user budgets were added while other end users' calls are in flight (their windows, their key's registry)",
    config({ endUserDay: false, keyMaxEndUsers: 5 }),
    async (h) => {
      admissionOf(await h.client.admit(call({ endUser: 'u2' })));
      admissionOf(await h.client.admit(call({ endUser: 'u3' })));
      expect((await h.client.configApply({ document: config({ keyMaxEndUsers: 5 }) })).ok).toBe(
        true,
      );
      admissionOf(await h.client.admit(call({ keyId: null })));
    },
  );

  checkedTest(
    'admission after the team moved under another department while a call is in flight (the new levels)',
    moved('dept1'),
    async (h) => {
      admissionOf(await h.client.admit(call({ keyId: null, endUser: undefined })));
      expect((await h.client.configApply({ document: moved('dept2') })).ok).toBe(true);
      admissionOf(await h.client.admit(call({ keyId: null, endUser: undefined })));
    },
  );
  /** team with a month budget of `limit` tokens, and (`day`) a day budget as large. */
  const roomy = (day: boolean) => ({
    ...BASE_CONFIG,
    tenants: [
      {
        id: 'team',
        budgets: [
          { window: 'month', limit: 10_000_000 },
          ...(day ? [{ window: 'day', limit: 10_000_000 }] : []),
        ],
        useCases,
      },
    ],
  });

  checkedTest(
    'admissions walking more calls in flight than one step (the walk’s copy of the in-flight set)',
    roomy(false),
    async (h) => {
      const plain = () => call({ keyId: null, endUser: undefined });
      const early = Array.from({ length: 1_001 }, plain);
      for (let i = 0; i < early.length; i += 100) {
        const batch = early.slice(i, i + 100);
        await Promise.all(batch.map(async (x) => admissionOf(await h.client.admit(x))));
      }
      expect((await h.client.configApply({ document: roomy(true) })).ok).toBe(true);
      // 1,000 of 1,001 held on the new window: refused until the walk is done, then admitted.
      const r = await h.client.admit(plain());
      expect(r.ok && !r.value.admitted && [r.value.code, r.value.retryAfterSeconds]).toEqual([
        'concurrency_limit',
        1,
      ]);
      admissionOf(await h.client.admit(plain()));
    },
  );
});
