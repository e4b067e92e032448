import { describe, expect } from 'vitest';
import type { AuthorityClient } from '@holdfast/runtime';
import { Keys } from '../src/keys.js';
import type { RedisClient } from '../src/redis.js';
import { rebuiltEqualsLive } from './rebuild-activity.js';
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
const KEY = { id: 'k1', sha256: 'a'.repeat(64) };
const MINUTE = { window: 'minute', limit: 2_200 };

type Budgets = Record<string, unknown>[];

/**
 * The team under `acme`, which has `parent` as budgets (a month's alone by default); its key
 * k1 has `own.key` and its end users `own.endUser` (none by default).
 */
function config(
  mode: string,
  budgets: Budgets,
  parent: Budgets = [MONTH],
  own: { key?: Budgets; endUser?: Budgets } = {},
) {
  return {
    ...BASE_CONFIG,
    tenants: [
      { id: 'acme', budgets: parent },
      {
        id: 'team',
        parent: 'acme',
        // onExpiry as its mode has it: a call admitted in post mode releases on expiry, and
        // still does after the switch to reserve (its record's expB), rebuilt alike.
        mode,
        maxInFlight: 64,
        budgets,
        keys: [{ ...KEY, budgets: own.key ?? [] }],
        endUserBudgets: own.endUser ?? [],
        useCases,
      },
    ],
  };
}

// Every call by key k1 for end user u1: the cases without budgets of theirs see them change
// nothing.
const call = () => ({
  ...miniCall(100, 1_000),
  tenant: 'team',
  keyId: KEY.id,
  endUser: 'u1',
  useCase: 'uc',
});

/** A case: MINUTE added to the key's budgets or the end users', which were `before`. */
function minuteAdded(own: 'key' | 'endUser', before: Budgets) {
  return {
    before: config('reserve', [MONTH], [MONTH], { [own]: before }),
    after: config('reserve', [MONTH], [MONTH], { [own]: [...before, MINUTE] }),
    scope: own === 'key' ? ('key' as const) : ('end_user' as const),
    budget: 'minute-tokens',
    each: CALL_T,
    limit: 2_200,
  };
}

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
  { name: "a minute budget added to the calls' key", ...minuteAdded('key', [MONTH]) },
  {
    name: "the key's minute budget switched from tokens to usd",
    before: config('reserve', [MONTH], [MONTH], { key: [{ window: 'minute', limit: 1e7 }] }),
    after: config('reserve', [MONTH], [MONTH], {
      key: [{ window: 'minute', limit: 0.001353, unit: 'usd' }],
    }),
    scope: 'key',
    budget: 'minute-usd',
    each: CALL_U,
    limit: 1_353,
  },
  { name: 'a minute budget added to end users that had none', ...minuteAdded('endUser', []) },
  {
    name: "a minute budget added to end users' month budget",
    ...minuteAdded('endUser', [MONTH]),
  },
];

type Usage = Awaited<ReturnType<AuthorityClient['usage']>>;

/**
 * The window of a case's budget: its level's or its key's in a usage reply, its end user's
 * from Redis (usage lists the end users admitted on budgets: u1 was not, when they are new).
 */
async function windowOf(
  u: Usage,
  c: (typeof cases)[number],
  redis: RedisClient,
  keys: Keys,
): Promise<{ used: number; held: number } | undefined> {
  if (c.scope === 'end_user') {
    const h = await redis.hgetall(keys.userWindow('acme', 'team', 'u1', c.budget));
    return { used: Number(h.s ?? 0), held: Number(h.h ?? 0) };
  }
  if (!u.ok) return undefined;
  const t = u.value.tenants[0]!;
  const windows =
    c.scope === 'key'
      ? t.keys.find((k) => k.id === KEY.id)?.windows
      : t.windows.filter((x) => x.tenant === (c.level ?? 'team'));
  return windows?.find((x) => x.budget === c.budget);
}

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
      await rebuiltEqualsLive(first, c.after, { redis, nc, iso });
      const keys = new Keys(iso.keyPrefix);

      const h = await start(c.after);
      refusalOf(await h.client.admit(call()));
      const usage = { promptTokens: 100, completionTokens: 1_000 };
      const settled = await Promise.all(
        early.map(({ reservationId }) => h.client.settle({ reservationId, tenant: 'team', usage })),
      );
      expect(settled.every((r) => r.ok && r.value.status === 'settled')).toBe(true);
      const w = await windowOf(await h.client.usage({ tenant: 'team' }), c, redis, keys);
      expect(w).toMatchObject({ held: 0 });
      expect(w!.used - 16 * c.each).toBeLessThanOrEqual(c.limit);
    });
  }
});

describe("other end users' calls in flight", () => {
  test("the first admission after an end-user budget is added adopts every end user's, rebuilt alike", async ({
    start,
    nc,
    redis,
    iso,
  }) => {
    const keys = new Keys(iso.keyPrefix);
    const h = await start(config('reserve', [MONTH]));
    const of = (endUser: string) => () => ({ ...call(), endUser });
    const early = [...Array.from({ length: 8 }, of('u1')), ...Array.from({ length: 8 }, of('u2'))];
    for (const x of early) admissionOf(await h.client.admit(x));
    const after = config('reserve', [MONTH], [MONTH], { endUser: [MINUTE] });
    expect((await h.client.configApply({ document: after })).ok).toBe(true);
    // u1's admission walks the calls in flight once: u2's are held on u2's window too.
    expect(refusalOf(await h.client.admit(of('u1')())).code).toBe('budget_exceeded');
    expect(refusalOf(await h.client.admit(of('u2')())).code).toBe('budget_exceeded');
    const held = await redis.hget(keys.userWindow('acme', 'team', 'u2', 'minute-tokens'), 'h');
    expect(Number(held)).toBe(8 * CALL_T);

    await rebuiltEqualsLive(h, after, { redis, nc, iso });
  });
});

describe('a team moved under another parent while its calls are in flight', () => {
  /** team under `parent` (dept1 or dept2, both under acme); dept2 has a minute budget. */
  const moved = (parent: string) => ({
    ...BASE_CONFIG,
    tenants: [
      { id: 'acme', budgets: [MONTH] },
      { id: 'dept1', parent: 'acme', budgets: [MONTH] },
      { id: 'dept2', parent: 'acme', budgets: [MONTH, MINUTE] },
      { id: 'team', parent, mode: 'reserve', maxInFlight: 64, budgets: [MONTH], useCases },
    ],
  });

  test("the new parent's windows hold them at the next admission, their closes give back on both, rebuilt alike", async ({
    start,
    nc,
    redis,
    iso,
  }) => {
    const first = await start(moved('dept1'));
    const keys = new Keys(iso.keyPrefix);
    const early = Array.from({ length: 16 }, call);
    for (const x of early) admissionOf(await first.client.admit(x));
    expect((await first.client.configApply({ document: moved('dept2') })).ok).toBe(true);
    for (let i = 0; i < 4; i++) {
      expect(refusalOf(await first.client.admit(call())).code).toBe('budget_exceeded');
    }

    await rebuiltEqualsLive(first, moved('dept2'), { redis, nc, iso });

    const h = await start(moved('dept2'));
    const usage = { promptTokens: 100, completionTokens: 1_000 };
    const settled = await Promise.all(
      early.map(({ reservationId }) => h.client.settle({ reservationId, tenant: 'team', usage })),
    );
    expect(settled.every((r) => r.ok && r.value.status === 'settled')).toBe(true);
    for (const [level, budget] of [
      ['dept1', 'month-tokens'],
      ['dept2', 'minute-tokens'],
      ['dept2', 'month-tokens'],
    ] as const) {
      const w = await redis.hmget(keys.window('acme', level, budget), 'h', 's');
      expect([level, budget, Number(w[0] ?? 0), Number(w[1])]).toEqual([
        level,
        budget,
        0,
        16 * CALL_T,
      ]);
    }
    for (const level of ['team', 'dept1', 'dept2', 'acme'])
      expect(await redis.zcard(keys.holds('acme', level))).toBe(0);
  });
});

describe('a month budget switched between sliding and calendar while calls are in flight', () => {
  // 16 calls in flight hold 17,600 of 20,000: two more fit (18,700, 19,800), a third not.
  const budget = (calendar: boolean) => [
    { window: 'month', limit: 20_000, ...(calendar ? { calendar } : {}) },
  ];
  const owners = [
    {
      name: "the team's",
      config: (c: boolean) => config('reserve', budget(c)),
      window: (k: Keys) => k.window('acme', 'team', 'month-tokens'),
    },
    {
      name: "the team's parent's",
      config: (c: boolean) => config('reserve', [MONTH], budget(c)),
      window: (k: Keys) => k.window('acme', 'acme', 'month-tokens'),
    },
    {
      name: "the calls' key's",
      config: (c: boolean) => config('reserve', [MONTH], [MONTH], { key: budget(c) }),
      window: (k: Keys) => k.keyWindow('acme', 'team', KEY.id, 'month-tokens'),
    },
    {
      name: "the end users'",
      config: (c: boolean) => config('reserve', [MONTH], [MONTH], { endUser: budget(c) }),
      window: (k: Keys) => k.userWindow('acme', 'team', 'u1', 'month-tokens'),
    },
  ];

  for (const o of owners) {
    for (const from of [false, true]) {
      const kind = (c: boolean) => (c ? 'calendar' : 'sliding');
      const name = `${o.name}, ${kind(from)} to ${kind(!from)}: its calls held once`;
      test(`${name}, rebuilt alike`, async ({ start, nc, redis, iso }) => {
        const keys = new Keys(iso.keyPrefix);
        const window = o.window(keys);
        const after = o.config(!from);
        const first = await start(o.config(from));
        const early = Array.from({ length: 16 }, call);
        for (const x of early) admissionOf(await first.client.admit(x));
        expect((await first.client.configApply({ document: after })).ok).toBe(true);
        // Same window (month-tokens): the 16 are on it already, not held a second time.
        const more = [call(), call()];
        for (const x of more) admissionOf(await first.client.admit(x));
        expect(Number(await redis.hget(window, 'h'))).toBe(18 * CALL_T);
        expect(refusalOf(await first.client.admit(call())).code).toBe('budget_exceeded');

        await rebuiltEqualsLive(first, after, { redis, nc, iso });

        const h = await start(after);
        const usage = { promptTokens: 100, completionTokens: 1_000 };
        const settled = await Promise.all(
          [...early, ...more].map(({ reservationId }) =>
            h.client.settle({ reservationId, tenant: 'team', usage }),
          ),
        );
        expect(settled.every((r) => r.ok && r.value.status === 'settled')).toBe(true);
        const w = await redis.hmget(window, 'h', 's');
        expect([Number(w[0] ?? 0), Number(w[1])]).toEqual([0, 18 * CALL_T]);
        expect(await redis.zcard(keys.holds('acme', 'team'))).toBe(0);
      });
    }
  }
});

describe('a team moved to another org while its calls are in flight', () => {
  /**
   * team under `org` (acme or globex, two roots: two hash slots); globex has a minute budget
   * and rival, another team, under it. team's minute budget is 2,200: two calls.
   */
  const inOrg = (org: string) => ({
    ...BASE_CONFIG,
    tenants: [
      { id: 'acme', budgets: [MONTH] },
      { id: 'globex', budgets: [MONTH, MINUTE] },
      { id: 'rival', parent: 'globex', mode: 'reserve', budgets: [MONTH], useCases },
      {
        id: 'team',
        parent: org,
        mode: 'reserve',
        maxInFlight: 64,
        budgets: [MONTH, MINUTE],
        useCases,
      },
    ],
  });
  const callOf = (tenant: string) => ({ ...call(), tenant, keyId: null, endUser: undefined });

  const name =
    "no window passes its limit: its old org's windows hold and bill them, the new org's neither (the team's limit counts once in each org), rebuilt alike";
  test(name, async ({ start, nc, redis, iso }) => {
    const keys = new Keys(iso.keyPrefix);
    const first = await start(inOrg('acme'));
    const early = [callOf('team'), callOf('team')];
    for (const x of early) admissionOf(await first.client.admit(x));
    expect(refusalOf(await first.client.admit(callOf('team'))).code).toBe('budget_exceeded');

    // Moved: globex's windows know nothing of the two in flight, which live in acme's slot.
    expect((await first.client.configApply({ document: inOrg('globex') })).ok).toBe(true);
    const later = [callOf('team'), callOf('team')];
    for (const x of later) expect(admissionOf(await first.client.admit(x)).org).toBe('globex');
    // globex's minute window is at its limit: neither team nor rival gets more.
    expect(refusalOf(await first.client.admit(callOf('team'))).code).toBe('budget_exceeded');
    expect(refusalOf(await first.client.admit(callOf('rival'))).code).toBe('budget_exceeded');

    // Moved back with the later two in flight: acme's windows still hold the early two.
    expect((await first.client.configApply({ document: inOrg('acme') })).ok).toBe(true);
    expect(refusalOf(await first.client.admit(callOf('team'))).code).toBe('budget_exceeded');

    await rebuiltEqualsLive(first, inOrg('acme'), { redis, nc, iso });

    const h = await start(inOrg('acme'));
    const usage = { promptTokens: 100, completionTokens: 1_000 };
    // Each closed in the org it was admitted in (the edge sends the admission's org).
    const settled = await Promise.all([
      ...early.map(({ reservationId }) =>
        h.client.settle({ reservationId, tenant: 'team', org: 'acme', usage }),
      ),
      ...later.map(({ reservationId }) =>
        h.client.settle({ reservationId, tenant: 'team', org: 'globex', usage }),
      ),
    ]);
    expect(settled.map((r) => r.ok && r.value.status)).toEqual(Array(4).fill('settled'));
    const window = async (org: string, level: string, budget: string) => {
      const w = await redis.hmget(keys.window(org, level, budget), 'h', 's');
      return [org, level, budget, Number(w[0] ?? 0), Number(w[1] ?? 0)];
    };
    // Every window billed what was held on it, at most its limit; the team's minute budget
    // billed 2,200 in each org's window: 4,400 in one minute, its limit once in each org.
    expect(
      await Promise.all([
        window('acme', 'team', 'minute-tokens'),
        window('acme', 'acme', 'month-tokens'),
        window('globex', 'team', 'minute-tokens'),
        window('globex', 'globex', 'minute-tokens'),
        window('globex', 'globex', 'month-tokens'),
      ]),
    ).toEqual([
      ['acme', 'team', 'minute-tokens', 0, 2 * CALL_T],
      ['acme', 'acme', 'month-tokens', 0, 2 * CALL_T],
      ['globex', 'team', 'minute-tokens', 0, 2 * CALL_T],
      ['globex', 'globex', 'minute-tokens', 0, 2 * CALL_T],
      ['globex', 'globex', 'month-tokens', 0, 2 * CALL_T],
    ]);
    for (const [org, level] of [
      ['acme', 'team'],
      ['acme', 'acme'],
      ['globex', 'team'],
      ['globex', 'globex'],
    ] as const)
      expect(await redis.zcard(keys.holds(org, level))).toBe(0);
  });
});

describe("end users adopted count in their key's maxEndUsers", () => {
  /** k1 may name 2 end users with budgets; the team's end users have `endUser` budgets. */
  const capped = (endUser: Budgets) => ({
    ...BASE_CONFIG,
    tenants: [
      { id: 'acme', budgets: [MONTH] },
      {
        id: 'team',
        parent: 'acme',
        mode: 'reserve',
        maxInFlight: 64,
        budgets: [MONTH],
        keys: [{ ...KEY, maxEndUsers: 2 }],
        endUserBudgets: endUser,
        useCases,
      },
    ],
  });
  const of = (endUser: string) => ({ ...call(), endUser });

  const name =
    "k1's five end users in flight when end-user budgets are added: adopted into k1's registry, so a sixth is refused, rebuilt alike";
  test(name, async ({ start, nc, redis, iso }) => {
    const keys = new Keys(iso.keyPrefix);
    const h = await start(capped([]));
    const names = ['u1', 'u2', 'u3', 'u4', 'u5'];
    // No end-user budgets yet: nothing tracks them, k1 names as many as it likes.
    for (const u of names) admissionOf(await h.client.admit(of(u)));
    const after = capped([MONTH]);
    expect((await h.client.configApply({ document: after })).ok).toBe(true);
    // u1's admission adopts the five: each one's window holds its call, each is registered.
    admissionOf(await h.client.admit(of('u1')));
    // k1 names 5 end users with budgets, past its 2: no new one (before, its registry had
    // u1 alone and u6 was admitted: 6 end users of k1 with budgets).
    const r = refusalOf(await h.client.admit(of('u6')));
    expect([r.code, r.message.startsWith(`Key ${KEY.id} `)]).toEqual(['end_user_limit', true]);
    expect(await redis.zcard(keys.users('acme', 'team'))).toBe(5);
    expect(await redis.zcard(keys.keyUsers('acme', 'team', KEY.id))).toBe(5);

    await rebuiltEqualsLive(h, after, { redis, nc, iso });
  });
});

describe('a walk of more calls in flight than one admission adopts (ADOPT_STEP, 1,000)', () => {
  // No maxInFlight: 2,500 calls in flight, a minute budget added (the team's or its key's).
  const many = (own: { team?: Budgets; key?: Budgets }) => {
    const c = config('reserve', [MONTH, ...(own.team ?? [])], [MONTH], { key: own.key ?? [] });
    const [org, team] = c.tenants;
    return { ...c, tenants: [org, { ...team, maxInFlight: undefined }] };
  };
  const owners = [
    {
      name: "the team's",
      field: 'ap',
      pending: ':adopting',
      window: (k: Keys) => k.window('acme', 'team', 'minute-tokens'),
      own: { team: [MINUTE] },
    },
    {
      name: "its key's",
      field: `apk:${KEY.id}`,
      pending: `:adopting:k:${KEY.id}`,
      window: (k: Keys) => k.keyWindow('acme', 'team', KEY.id, 'minute-tokens'),
      own: { key: [MINUTE] },
    },
  ];
  for (const o of owners) {
    const name = `${o.name} minute budget added: three admissions walk them, refused until the last, which sees them all`;
    test(
      name,
      async ({ start, redis, iso }) => {
        const keys = new Keys(iso.keyPrefix);
        const h = await start(many({}));
        const early = Array.from({ length: 2_500 }, call);
        for (let i = 0; i < early.length; i += 100) {
          const batch = early.slice(i, i + 100);
          await Promise.all(batch.map(async (x) => admissionOf(await h.client.admit(x))));
        }
        expect((await h.client.configApply({ document: many(o.own) })).ok).toBe(true);
        // 1,000 and 1,000: not all seen yet, refused (retry in 1 s) whatever room there is.
        for (const walked of [1_000, 2_000]) {
          const r = refusalOf(await h.client.admit(call()));
          expect([r.code, r.retryAfterSeconds]).toEqual(['concurrency_limit', 1]);
          expect(r.message).toContain('being held on the new budgets');
          expect(Number(await redis.hget(o.window(keys), 'h'))).toBe(walked * CALL_T);
        }
        // The last 500: every call held, the check refuses on the window.
        expect(refusalOf(await h.client.admit(call())).code).toBe('budget_exceeded');
        expect(Number(await redis.hget(o.window(keys), 'h'))).toBe(2_500 * CALL_T);
        expect(await redis.hget(keys.state('acme', 'team'), o.field)).toBeNull();
        // The walk's copy of the in-flight set is gone.
        const copy = keys.state('acme', 'team').replace(/:state$/, o.pending);
        expect(await redis.exists(copy)).toBe(0);
        const usage = { promptTokens: 100, completionTokens: 1_000 };
        for (let i = 0; i < early.length; i += 100) {
          const batch = early.slice(i, i + 100);
          await Promise.all(
            batch.map(({ reservationId }) =>
              h.client.settle({ reservationId, tenant: 'team', usage }),
            ),
          );
        }
        expect(Number(await redis.hget(o.window(keys), 'h'))).toBe(0);
      },
      120_000,
    );
  }
});
