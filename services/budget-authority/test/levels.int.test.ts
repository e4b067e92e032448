import {
  END_USER_FILTER_MAX,
  type EndUserFilter,
  endUserFilterOf,
  endUserSet,
  type HoldfastEvent,
  mayTrack,
  type TenantUsage,
  type WindowState,
} from '@holdfast/events';
import { type Isolation, waitFor } from '@holdfast/testkit';
import { describe, expect } from 'vitest';
import {
  admissionOf,
  authorityTest as test,
  newId,
  quiescent,
  readEvents,
  refusalOf,
} from './harness.js';
import { outboxesRelayed, rebuilder } from './rebuild-activity.js';
import { Keys } from '../src/keys.js';
import { stateKeys } from '../src/rebuild.js';
import type { RedisClient } from '../src/redis.js';
import { startTestAuthority, type TestAuthority } from '../src/testing.js';

/**
 * Keys and end users as budget levels (issue 16 part 2): a key's own budgets and each end
 * user's are checked and charged with the team's and the org's in the one atomic step, so no
 * level is ever over its limit whatever the concurrency; an end user over its budget is refused
 * while the team's other end users are served; the number of end users is bounded, and a
 * refused new one leaves nothing behind.
 */

const useCases = [{ id: 'uc', maxTokens: 2_000, models: ['m'] }];
const upstreams = [{ id: 'u', baseUrl: 'http://127.0.0.1:1/v1' }];
const models = [{ id: 'm', upstream: 'u', price: { inputPerMTok: 0.5, outputPerMTok: 1.5 } }];
const key = (id: string, budgets: unknown[] = []) => ({
  id,
  sha256: id
    .padEnd(64, '0')
    .replace(/[^0-9a-f]/g, 'a')
    .slice(0, 64),
  budgets,
});

/** A small admit of `team` for the end user (none: no end user), by the key (none: null). */
const admitOf = (
  h: TestAuthority,
  endUser?: string,
  keyId: string | null = null,
  remember = false,
) =>
  h.client.admit({
    reservationId: newId(),
    tenant: 'team',
    keyId,
    ...(endUser ? { endUser } : {}),
    ...(remember ? { rememberEndUserCap: true as const } : {}),
    useCase: 'uc',
    model: 'm',
    promptTokens: 10,
    maxTokens: 10,
  });

/**
 * How long a call of the 256-in-flight test waits for its answer: what it proves is the limits
 * and the books, not latency, and 300 callers on 2 replicas of a loaded 2-core box (a load of
 * 10-16) outwaited the client's 5 s.
 */
const CALL_MS = 30_000;

const all = (t: TenantUsage): WindowState[] => [
  ...t.windows,
  ...t.keys.flatMap((k) => k.windows),
  ...t.endUsers.flatMap((u) => u.windows),
];

/** Charged tokens of every reservation event, summed by `by` (what the windows were charged). */
function charged(events: HoldfastEvent[], by: (e: HoldfastEvent) => string | undefined) {
  const out = new Map<string, number>();
  for (const e of events) {
    if (!e.type.startsWith('reservation.') || e.type === 'reservation.overrun') continue;
    const k = by(e);
    if (k === undefined || !('chargedTokens' in e)) continue;
    out.set(k, (out.get(k) ?? 0) + e.chargedTokens);
  }
  return out;
}

describe('key and end-user budgets', () => {
  test('no level is ever over its limit under 256+ calls in flight; the books agree per key and end user', async ({
    redisUrl,
    redis,
    nc,
    natsUrl,
    iso,
  }) => {
    const config = {
      upstreams,
      models,
      tenants: [
        { id: 'org', budgets: [{ window: 'day', limit: 900_000, unit: 'tokens' }] },
        {
          id: 'team',
          parent: 'org',
          budgets: [
            { window: 'day', limit: 600_000, unit: 'tokens' },
            { window: 'day', limit: 0.6, unit: 'usd' },
          ],
          endUserBudgets: [
            { window: 'day', limit: 30_000, unit: 'tokens' },
            { window: 'month', limit: 0.03, unit: 'usd' },
          ],
          useCases,
          keys: [
            key('k1', [{ window: 'day', limit: 120_000, unit: 'tokens' }]),
            key('k2', [
              { window: 'day', limit: 80_000, unit: 'tokens' },
              { window: 'minute', limit: 0.05, unit: 'usd' },
            ]),
            key('k3'),
          ],
        },
      ],
    };
    const replicas = await Promise.all(
      [0, 1].map(() =>
        startTestAuthority({
          natsUrl,
          redisUrl,
          nc,
          names: iso.names,
          keyPrefix: iso.keyPrefix,
          config,
          clock: false,
          sweepIntervalMs: 200,
          // A Redis command of a loaded 2-core box can take over the default 1 s ('Command
          // timed out' at a load of 16); the limits and the books do not depend on it.
          redisTimeoutMs: 5_000,
        }),
      ),
    );
    const client = replicas[0]!.client;
    try {
      const users = Array.from({ length: 12 }, (_, i) => `user-${i}`);
      const rnd = (lo: number, hi: number) => lo + Math.floor(Math.random() * (hi - lo + 1));
      const inFlight = { now: 0, peak: 0 };
      let admitted = 0;
      let refused = 0;
      const worker = async () => {
        for (let i = 0; i < 6; i++) {
          const reservationId = newId();
          const keyId = ['k1', 'k2', 'k3'][rnd(0, 2)]!;
          const endUser = rnd(0, 12) === 12 ? undefined : users[rnd(0, users.length - 1)];
          const promptTokens = rnd(50, 1_500);
          inFlight.now++;
          inFlight.peak = Math.max(inFlight.peak, inFlight.now);
          const r = await client.admit(
            {
              reservationId,
              tenant: 'team',
              keyId,
              ...(endUser ? { endUser } : {}),
              useCase: 'uc',
              model: 'm',
              promptTokens,
              maxTokens: rnd(1, 2_000),
              leaseMs: 3_000,
            },
            CALL_MS,
          );
          inFlight.now--;
          if (!r.ok) throw new Error(`admit failed: ${r.error.code}`);
          if (!r.value.admitted) {
            refused++;
            continue;
          }
          admitted++;
          await new Promise((res) => setTimeout(res, rnd(0, 20)));
          const fate = Math.random();
          // Settles and releases name only the reservation half the time: the record knows
          // the key and the end user, so their windows are closed either way.
          const who = Math.random() < 0.5 ? { keyId, ...(endUser ? { endUser } : {}) } : {};
          if (fate < 0.75) {
            const s = await client.settle(
              {
                reservationId,
                tenant: 'team',
                ...who,
                usage: { promptTokens, completionTokens: rnd(0, r.value.maxTokens) },
              },
              CALL_MS,
            );
            if (!s.ok || s.value.status !== 'settled')
              throw new Error(`settle ${JSON.stringify(s)}`);
          } else if (fate < 0.92) {
            const s = await client.release(
              {
                reservationId,
                tenant: 'team',
                ...who,
                reason: 'upstream_error',
              },
              CALL_MS,
            );
            if (!s.ok || s.value.status !== 'released')
              throw new Error(`release ${JSON.stringify(s)}`);
          } // else abandoned: its lease expires and bills the worst case
        }
      };
      await Promise.all(Array.from({ length: 300 }, worker));
      expect(inFlight.peak).toBeGreaterThanOrEqual(256);

      await quiescent(client, redis, iso.keyPrefix);
      const events = await readEvents(nc, iso.names);
      // One tenant's usage lists up to 100 end users (every tenant's, 10 each): all 12 here.
      const one = await client.usage({ tenant: 'team' });
      if (!one.ok) throw one.error;
      const team = one.value.tenants[0]!;
      expect(team.endUsers).toHaveLength(users.length);
      expect(team.keys.map((k) => k.id).sort()).toEqual(['k1', 'k2']);
      expect(team.endUserCount).toBe(users.length);

      // The invariant after every state change, for every level: org, team, key, end user.
      const checked = { team: 0, key: 0, end_user: 0 };
      for (const e of events) {
        if (!('windows' in e)) continue;
        for (const w of e.windows) {
          const name = `${e.type} ${w.scope ?? 'team'} ${w.subject ?? w.tenant}/${w.budget}`;
          expect(w.used + w.held, name).toBeLessThanOrEqual(w.limit);
          checked[w.scope ?? 'team']++;
        }
      }
      expect(checked.key).toBeGreaterThan(200);
      expect(checked.end_user).toBeGreaterThan(200);
      for (const w of all(team)) {
        expect(w.held).toBe(0);
        expect(w.used, `${w.scope ?? ''} ${w.subject ?? ''} ${w.budget}`).toBeLessThanOrEqual(
          w.limit,
        );
      }
      // Every level really was a limit: refusals by key and by end-user budgets.
      const refusals = events.filter(
        (e): e is Extract<HoldfastEvent, { type: 'admission.refused' }> =>
          e.type === 'admission.refused' && !e.shadow,
      );
      expect(refusals.some((e) => e.scope === 'key')).toBe(true);
      expect(refusals.some((e) => e.scope === 'end_user')).toBe(true);
      expect(refused).toBeGreaterThan(0);

      // The books agree to the token: what events charged each key and end user is what its
      // day window holds as used (nothing has slid out of a day window during the test).
      const byUser = charged(events, (e) => ('endUser' in e ? e.endUser : undefined));
      for (const u of team.endUsers) {
        const day = u.windows.find((w) => w.budget === 'day-tokens')!;
        expect(day.used, u.id).toBe(byUser.get(u.id) ?? 0);
      }
      const byKey = charged(events, (e) => ('keyId' in e ? (e.keyId ?? undefined) : undefined));
      for (const k of team.keys) {
        const day = k.windows.find((w) => w.budget === 'day-tokens')!;
        expect(day.used, k.id).toBe(byKey.get(k.id) ?? 0);
      }
      const teamDay = team.windows.find((w) => w.tenant === 'team' && w.budget === 'day-tokens')!;
      expect(teamDay.used).toBe([...byKey.values()].reduce((a, b) => a + b, 0));
      console.log(
        `peak in flight ${inFlight.peak}; admitted ${admitted}, refused ${refused}; ` +
          `refused by key ${refusals.filter((e) => e.scope === 'key').length}, by end user ${refusals.filter((e) => e.scope === 'end_user').length} (events); window states checked ${JSON.stringify(checked)}`,
      );
    } finally {
      await Promise.all(replicas.map((r) => r.stop()));
    }
  });

  test('an end user over its budget is refused while the team serves its other end users', async ({
    start,
    nc,
    iso,
  }) => {
    const h = await start({
      upstreams,
      models,
      tenants: [
        {
          id: 'team',
          budgets: [{ window: 'day', limit: 100_000, unit: 'tokens' }],
          endUserBudgets: [{ window: 'day', limit: 1_000, unit: 'tokens' }],
          useCases,
        },
      ],
    });
    const call = (endUser: string | undefined, promptTokens = 300, maxTokens = 200) =>
      h.client.admit({
        reservationId: newId(),
        tenant: 'team',
        keyId: null,
        ...(endUser ? { endUser } : {}),
        useCase: 'uc',
        model: 'm',
        promptTokens,
        maxTokens,
      });
    const settle = async (r: Awaited<ReturnType<typeof call>>, completionTokens: number) => {
      const a = admissionOf(r);
      const s = await h.client.settle({
        reservationId: a.reservationId,
        tenant: 'team',
        usage: { promptTokens: 300, completionTokens },
      });
      expect(s.ok && s.value.status).toBe('settled');
    };
    await settle(await call('alice'), 200);
    const second = await call('alice');
    await settle(second, 150);
    // alice has used 950 of 1,000: a worst case of 500 does not fit.
    const no = refusalOf(await call('alice'));
    expect(no.code).toBe('budget_exceeded');
    expect(no.message).toContain('end user alice of team team');
    expect(no.windows.find((w) => w.scope === 'end_user')).toMatchObject({
      subject: 'alice',
      used: 950,
      limit: 1_000,
    });
    // Others of the same team are served, and so are calls that name no end user.
    admissionOf(await call('bob'));
    admissionOf(await call(undefined));
    // The refusal event says whose budget refused.
    const refusal = await waitFor(async () =>
      (await readEvents(nc, iso.names)).find((e) => e.type === 'admission.refused'),
    );
    expect(refusal).toMatchObject({ endUser: 'alice', scope: 'end_user', budget: 'day-tokens' });
    expect(refusal.type === 'admission.refused' && refusal.message).toContain('end user alice');

    // Usage: every tracked end user, or just one.
    const u = await h.client.usage({ tenant: 'team' });
    expect(u.ok && u.value.tenants[0]!.endUsers.map((x) => x.id).sort()).toEqual(['alice', 'bob']);
    const one = await h.client.usage({ tenant: 'team', endUser: 'alice' });
    expect(one.ok && one.value.tenants[0]!.endUsers).toEqual([
      expect.objectContaining({ id: 'alice', windows: [expect.objectContaining({ used: 950 })] }),
    ]);
    const none = await h.client.usage({ tenant: 'team', endUser: 'carol' });
    expect(none.ok && none.value.tenants[0]!.endUsers).toEqual([]);
  });

  test('end users are bounded: a new one past maxEndUsers is refused and leaves nothing in Redis', async ({
    start,
    redis,
    iso,
  }) => {
    const h = await start({
      upstreams,
      models,
      tenants: [
        {
          id: 'team',
          maxEndUsers: 2,
          endUserBudgets: [{ window: 'day', limit: 10_000, unit: 'tokens' }],
          useCases,
        },
      ],
    });
    const call = (endUser?: string) => admitOf(h, endUser);
    admissionOf(await call('u1'));
    admissionOf(await call('u2'));
    admissionOf(await call('u1')); // a known end user is still served
    for (let i = 0; i < 50; i++) {
      const no = refusalOf(await call(`spam-${i}`));
      expect(no.code).toBe('end_user_limit');
    }
    expect(refusalOf(await call('spam-0')).message).toContain('maxEndUsers');
    admissionOf(await call()); // a call without an end user is not an end user
    const left = await redis.keys(`${iso.keyPrefix}:*:u:team:spam-*`);
    expect(left).toEqual([]);
    const u = await h.client.usage({ tenant: 'team' });
    expect(u.ok && u.value.tenants[0]!.endUserCount).toBe(2);

    // Long idle end users are forgotten and make room (31 days on the test clock).
    h.clock.advance(32 * 86_400_000);
    admissionOf(await call('u3'));
  });

  test('a refusal at maxEndUsers carries the end users tracked, up to END_USER_FILTER_MAX, to an edge that remembers it', async ({
    start,
    redis,
    iso,
  }) => {
    const team = (maxEndUsers: number) => ({
      id: 'team',
      maxEndUsers,
      endUserBudgets: [{ window: 'day' as const, limit: 10_000, unit: 'tokens' as const }],
      useCases,
      keys: [{ ...key('k'), maxEndUsers: 1 }],
    });
    const config = (maxEndUsers: number) => ({ upstreams, models, tenants: [team(maxEndUsers)] });
    const apply = async (maxEndUsers: number) =>
      expect((await h.authority.ctx.config.apply(config(maxEndUsers), 'test')).ok).toBe(true);
    const h = await start(config(2));
    const call = (endUser: string, keyId: string | null = null) => admitOf(h, endUser, keyId, true);
    const users = `${iso.keyPrefix}:{team}:t:team:users`;
    const cached = () => redis.exists(`${users}:filter`);
    admissionOf(await call('u1'));
    admissionOf(await call('u2'));
    const no = refusalOf(await call('u3'));
    expect(no.code).toBe('end_user_limit');
    // Built by admit.lua as the edge reads it (the same hash, bit for bit).
    expect(no.trackedFilter).toEqual(endUserFilterOf(['u1', 'u2']));
    expect(await cached()).toBe(1);
    expect(refusalOf(await call('u4')).trackedFilter).toEqual(no.trackedFilter);
    // Not asked (an edge that remembers no refusals, an older one): not read, not sent.
    expect(refusalOf(await admitOf(h, 'u3')).trackedFilter).toBeUndefined();
    // Its repeats at the edge are counted under its summary (refusals.report takes it).
    expect(no.summary?.kind).toMatch(/^team\|end_user_limit\|/);
    // A key's own maxEndUsers: the team's end users may grow through its other keys, so none.
    await apply(10);
    admissionOf(await call('u3', 'k'));
    // An end user added: the kept filter no longer holds them all, and is forgotten.
    expect(await cached()).toBe(0);
    const byKey = refusalOf(await call('u4', 'k'));
    expect(byKey.code).toBe('end_user_limit');
    expect(byKey.trackedFilter).toBeUndefined();
    // The default cap's worth (5,000 here): every id hashed alike in Lua and Node.
    await apply(5_000);
    expect(await redis.zcard(users)).toBe(3);
    const seen = Array.from({ length: 5_000 - 3 }, (_, i) => [h.clock.now, `x${i}`]);
    await redis.zadd(users, ...seen.flat());
    const most = refusalOf(await call('u5'));
    expect(most.trackedFilter).toEqual(endUserFilterOf(await redis.zrange(users, 0, -1)));
    // More than END_USER_FILTER_MAX tracked: none (the edge asks the authority as before).
    const many = END_USER_FILTER_MAX + 1;
    await apply(many);
    admissionOf(await call('u5'));
    const more = Array.from({ length: many - 5_001 }, (_, i) => [h.clock.now, `y${i}`]);
    await redis.zadd(users, ...more.flat());
    expect(await redis.zcard(users)).toBe(many);
    const full = refusalOf(await call('u6'));
    expect(full.code).toBe('end_user_limit');
    expect(full.trackedFilter).toBeUndefined();
  });

  test("a refused new end user's windows are not created either (budget refusal)", async ({
    start,
    redis,
    iso,
  }) => {
    const h = await start({
      upstreams,
      models,
      tenants: [
        {
          id: 'team',
          budgets: [{ window: 'day', limit: 100, unit: 'tokens' }],
          endUserBudgets: [{ window: 'day', limit: 10_000, unit: 'tokens' }],
          useCases,
        },
      ],
    });
    for (let i = 0; i < 20; i++) {
      const no = refusalOf(
        await h.client.admit({
          reservationId: newId(),
          tenant: 'team',
          keyId: null,
          endUser: `new-${i}`,
          useCase: 'uc',
          model: 'm',
          promptTokens: 90,
          maxTokens: 50,
        }),
      );
      expect(no.code).toBe('budget_exceeded');
    }
    expect(await redis.keys(`${iso.keyPrefix}:*:u:team:*`)).toEqual([]);
    const u = await h.client.usage({ tenant: 'team' });
    expect(u.ok && u.value.tenants[0]!.endUserCount).toBe(0);
  });

  test('a hold grows only as far as its end user can pay, also when the extend names nobody', async ({
    start,
  }) => {
    const h = await start({
      upstreams,
      models,
      tenants: [
        {
          id: 'team',
          mode: 'adaptive',
          adaptive: { percentile: 0.95, minSamples: 1, samples: 10 },
          budgets: [{ window: 'day', limit: 1_000_000, unit: 'tokens' }],
          endUserBudgets: [{ window: 'day', limit: 1_000, unit: 'tokens' }],
          useCases,
        },
      ],
    });
    const admit = (maxTokens: number) =>
      h.client.admit({
        reservationId: newId(),
        tenant: 'team',
        keyId: null,
        endUser: 'erin',
        useCase: 'uc',
        model: 'm',
        promptTokens: 100,
        maxTokens,
        extensible: true,
      });
    // No samples yet: the first call holds its worst case.
    const first = admissionOf(await admit(800));
    await h.client.settle({
      reservationId: first.reservationId,
      tenant: 'team',
      usage: { promptTokens: 100, completionTokens: 10 },
    });
    const a = admissionOf(await admit(2_000));
    expect(a.coveredOutputTokens).toBe(10);
    const grown = await h.client.extend({
      reservationId: a.reservationId,
      tenant: 'team',
      outputTokens: 2_000,
    });
    expect(grown.ok && grown.value.status).toBe('extended');
    // 1,000 - 110 used - 110 held = 780 more output at most.
    expect(grown.ok && grown.value.coveredOutputTokens).toBe(10 + 780);
    const u = await h.client.usage({ tenant: 'team', endUser: 'erin' });
    const w = u.ok ? u.value.tenants[0]!.endUsers[0]!.windows[0]! : undefined;
    expect(w && w.used + w.held).toBe(1_000);
  });

  test("an end user's windows always expire: reading or refusing an idle end user, or a budget added to end users, leaves none without a TTL", async ({
    start,
    redis,
    iso,
  }) => {
    const minute = { window: 'minute', limit: 10_000, unit: 'tokens' };
    const day = { window: 'day', limit: 10_000, unit: 'tokens' };
    const config = (endUserBudgets: unknown[]) => ({
      upstreams,
      models,
      tenants: [
        {
          id: 'team',
          budgets: [{ window: 'month', limit: 1_000, unit: 'tokens' }],
          endUserBudgets,
          useCases,
        },
      ],
    });
    const h = await start(config([minute]));
    const call = (endUser: string, promptTokens = 10) =>
      h.client.admit({
        reservationId: newId(),
        tenant: 'team',
        keyId: null,
        endUser,
        useCase: 'uc',
        model: 'm',
        promptTokens,
        maxTokens: 10,
      });
    const windows = () => redis.keys(`${iso.keyPrefix}:*:u:team:*`);
    const ttls = async () =>
      Promise.all((await windows()).map(async (k) => [k, await redis.pttl(k)] as const));
    for (const user of ['idle-read', 'idle-refused']) {
      const a = admissionOf(await call(user));
      await h.client.settle({
        reservationId: a.reservationId,
        tenant: 'team',
        endUser: user,
        usage: { promptTokens: 10, completionTokens: 5 },
      });
    }
    // Both idle for longer than their minute window, still tracked.
    h.clock.advance(5 * 60_000);
    await h.client.usage({ tenant: 'team', endUser: 'idle-read' });
    // Refused by the team's month (1,000), not by its own window.
    expect(refusalOf(await call('idle-refused', 2_000)).code).toBe('budget_exceeded');
    // A day budget added to every end user: read and refused before any admission of them.
    expect((await h.client.configApply({ document: config([minute, day]) })).ok).toBe(true);
    await h.client.usage({ tenant: 'team' });
    expect(refusalOf(await call('idle-refused', 2_000)).code).toBe('budget_exceeded');
    const all = await ttls();
    expect(all.length).toBe(4);
    for (const [k, ttl] of all) expect(ttl, k).toBeGreaterThan(30 * 86_400_000);
  });
});

/**
 * The filter a refusal at maxEndUsers carries is kept beside the registry (`<registry>:filter`,
 * 10 s): every writer that adds an end user to the registry deletes it, so an edge is never told
 * a filter lacking an end user the team tracks (who it would refuse wrongly). Each writer after
 * a kept filter lacking the end user it adds: x's call, admitted while the team had no end-user
 * budgets, is in flight when they come back.
 */
describe("the kept filter of a team's end users", () => {
  const DAY = { window: 'day', limit: 1_000_000, unit: 'tokens' };
  const MINUTE = { window: 'minute', limit: 1_000_000, unit: 'tokens' };
  const config = (maxEndUsers: number, endUserBudgets: unknown[]) => ({
    upstreams,
    models,
    tenants: [{ id: 'team', mode: 'reserve', maxEndUsers, endUserBudgets, useCases }],
  });
  const call = (endUser: string) => ({
    reservationId: newId(),
    tenant: 'team',
    keyId: null,
    endUser,
    rememberEndUserCap: true as const,
    useCase: 'uc',
    model: 'm',
    promptTokens: 10,
    maxTokens: 10,
  });
  type Started = {
    start: (config: unknown) => Promise<TestAuthority>;
    redis: RedisClient;
    iso: Isolation;
  };
  const holds = (filter: EndUserFilter | undefined, endUser: string) =>
    filter !== undefined && mayTrack(endUserSet(filter), endUser);

  /**
   * u1 and u2 tracked at maxEndUsers 2 and a refusal keeps their filter; x's call in flight
   * untracked, then end-user budgets again: a refusal before x's call is adopted carries no
   * filter (an edge would refuse x, whose adoption or settle tracks it), the kept one stays.
   * Returns the authority, x's call and the registry.
   */
  async function keptWithoutX({ start, redis, iso }: Started) {
    const users = new Keys(iso.keyPrefix).users('team', 'team');
    const h = await start(config(2, [DAY]));
    const apply = async (budgets: unknown[]) =>
      expect((await h.authority.ctx.config.apply(config(2, budgets), 'test')).ok).toBe(true);
    admissionOf(await h.client.admit(call('u1')));
    admissionOf(await h.client.admit(call('u2')));
    const kept = refusalOf(await h.client.admit(call('u0')));
    expect(kept.trackedFilter).toEqual(endUserFilterOf(['u1', 'u2']));
    await apply([]);
    const x = call('x');
    admissionOf(await h.client.admit(x));
    await apply([DAY, MINUTE]);
    const no = refusalOf(await h.client.admit(call('u3')));
    expect(no.code).toBe('end_user_limit');
    expect(no.trackedFilter).toBeUndefined();
    expect(await redis.exists(`${users}:filter`)).toBe(1);
    expect(await redis.zscore(users, 'x')).toBeNull();
    return { h, x, users };
  }

  /**
   * x tracked, the kept filter deleted; once an admission adopted the calls in flight (u1's),
   * the next refusal's filter holds x, whose call is admitted (an edge with that filter would
   * ask the authority, never refuse it).
   */
  async function trackedWithX(h: TestAuthority, users: string, redis: RedisClient) {
    expect(await redis.zscore(users, 'x')).not.toBeNull();
    expect(await redis.exists(`${users}:filter`)).toBe(0);
    admissionOf(await h.client.admit(call('u1')));
    const next = refusalOf(await h.client.admit(call('u4')));
    expect(next.trackedFilter).toEqual(endUserFilterOf(['u1', 'u2', 'x']));
    expect(holds(next.trackedFilter, 'x')).toBe(true);
    admissionOf(await h.client.admit(call('x')));
  }

  test('adopted (adoptOwn): x is tracked, the kept filter deleted, the next refusal holds x', async ({
    start,
    redis,
    iso,
  }) => {
    const { h, users } = await keptWithoutX({ start, redis, iso });
    // u1's admission adopts every end user's calls in flight into the budgets added: x's too.
    admissionOf(await h.client.admit(call('u1')));
    await trackedWithX(h, users, redis);
  });

  test("closed (close.lua registers a settle's end user): x is tracked, the kept filter deleted, the next refusal holds x", async ({
    start,
    redis,
    iso,
  }) => {
    const { h, x, users } = await keptWithoutX({ start, redis, iso });
    // Settled (naming its end user, as an edge does) before any admission adopted it: billed
    // on x's windows, x tracked.
    const s = await h.client.settle({
      reservationId: x.reservationId,
      tenant: 'team',
      endUser: 'x',
      usage: { promptTokens: 10, completionTokens: 10 },
    });
    expect(s.ok && s.value.status).toBe('settled');
    await trackedWithX(h, users, redis);
  });

  test('rebuilt (the rebuild registers the end users of calls in flight): no filter mixed in, the next refusal holds x', async ({
    start,
    redis,
    nc,
    iso,
  }) => {
    const { h, users } = await keptWithoutX({ start, redis, iso });
    const keys = new Keys(iso.keyPrefix);
    const filter = keys.usersFilter('team', 'team');
    await outboxesRelayed(redis, keys);
    const now = h.clock.now;
    await h.stop();
    // A filter left from before the loss is state: the rebuild refuses to mix it in (its own
    // delete of the filter, beside each registry it writes, is a second guard no run reaches).
    const left = await stateKeys(redis, keys);
    expect(left).toContain(filter);
    await redis.del(...left.filter((k) => k !== filter));
    const after = config(2, [DAY, MINUTE]);
    const rebuild = () => rebuilder({ redis, nc, names: iso.names, keys, now, config: after });
    await expect(rebuild().run()).rejects.toThrow(/state keys/);
    await redis.del(filter);
    await rebuild().run();
    expect((await redis.zrange(users, 0, -1)).sort()).toEqual(['u1', 'u2', 'x']);
    expect(await redis.exists(filter)).toBe(0);
    const again = await start(after);
    // The rebuild held every call in flight but wrote no plan mark: the first admission walks
    // (finding them held), and refusals carry the filter from then.
    expect(refusalOf(await again.client.admit(call('u4'))).trackedFilter).toBeUndefined();
    admissionOf(await again.client.admit(call('u1')));
    const next = refusalOf(await again.client.admit(call('u4')));
    expect(next.trackedFilter).toEqual(endUserFilterOf(['u1', 'u2', 'x']));
    expect(holds(next.trackedFilter, 'x')).toBe(true);
  });

  test('forgotten (31 days idle, swept at the cap): the kept filter still holds them, a false positive the authority answers', async ({
    start,
    redis,
    iso,
  }) => {
    const users = `${iso.keyPrefix}:{team}:t:team:users`;
    const h = await start(config(3, [DAY]));
    for (const u of ['u1', 'u2', 'u3']) admissionOf(await h.client.admit(call(u)));
    const kept = refusalOf(await h.client.admit(call('u4'))).trackedFilter;
    expect(kept).toEqual(endUserFilterOf(['u1', 'u2', 'u3']));
    // u1 idle 31 days, u2 and u3 seen again; the cap lowered so the sweep leaves it full.
    h.clock.advance(32 * 86_400_000);
    admissionOf(await h.client.admit(call('u2')));
    admissionOf(await h.client.admit(call('u3')));
    expect((await h.authority.ctx.config.apply(config(2, [DAY]), 'test')).ok).toBe(true);
    const no = refusalOf(await h.client.admit(call('u5')));
    expect(await redis.zscore(users, 'u1')).toBeNull();
    // Forgetting deletes nothing: the filter holds u1, whom an edge asks the authority about
    // (never refuses itself), and the authority refuses as a new end user at the cap.
    expect(no.trackedFilter).toEqual(kept);
    expect(holds(no.trackedFilter, 'u1')).toBe(true);
    expect(refusalOf(await h.client.admit(call('u1'))).code).toBe('end_user_limit');
  });
});
