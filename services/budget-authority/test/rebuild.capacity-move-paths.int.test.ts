import { waitFor, type Isolation } from '@holdfast/testkit';
import type { Redis } from 'ioredis';
import { expect } from 'vitest';
import { Keys } from '../src/keys.js';
import type { TestAuthority } from '../src/testing.js';
import { admissionOf, BASE_CONFIG, miniCall, authorityTest as test } from './harness.js';
import { lostAndRebuilt } from './rebuild-activity.js';

/**
 * The paths of `reservation.moved` past rebuild.capacity-move.int.test.ts's: a move onto a
 * fallback that declares no capacity, a move that names no upstream it left, a config that lost
 * the fallback or the model before the rebuild, and moved calls that then settle, release,
 * expire or move again (the fallback's fallback). Rebuilt Redis must equal live Redis key by
 * key, and a rebuild under a changed config must neither break nor invent a capacity key.
 * Before the replay kept the takes as capacity.lua keeps them (a record per upstream and call),
 * a retried or doubled move rebuilt 1,000 tokens on a fallback holding 500 live, a move onto
 * the call's own upstream (refused since: capacity-move.hostile.int.test.ts) put its 500 a
 * bucket later, and a move without `fromUpstream` lost the first upstream's records.
 */

const config = {
  ...BASE_CONFIG,
  upstreams: [
    {
      ...BASE_CONFIG.upstreams[0]!,
      capacity: { tokensPerMinute: 20_000, counting: 'usage' as const },
    },
    { id: 'backup', baseUrl: 'http://127.0.0.1:8090/v1', capacity: { tokensPerMinute: 20_000 } },
    {
      id: 'reserve',
      baseUrl: 'http://127.0.0.1:8091/v1',
      capacity: { tokensPerMinute: 20_000, counting: 'usage' as const },
    },
    { id: 'spare', baseUrl: 'http://127.0.0.1:8092/v1' },
  ],
  models: BASE_CONFIG.models.map((m) =>
    m.id === 'gpt-4o-mini' ? { ...m, fallbackUpstreams: ['backup', 'reserve', 'spare'] } : m,
  ),
  tenants: [
    {
      id: 'team',
      capacityShare: 0.9,
      budgets: [{ window: 'day', limit: 100_000 }],
      useCases: [{ id: 'uc', maxTokens: 2_000, models: ['gpt-4o-mini'] }],
    },
  ],
};

const tenant = 'team';
const model = 'gpt-4o-mini';

async function admitted(h: TestAuthority, leaseMs?: number): Promise<string> {
  const call = { ...miniCall(100, 400), tenant, useCase: 'uc', ...(leaseMs ? { leaseMs } : {}) };
  expect(admissionOf(await h.client.admit(call)).upstream).toBe('default');
  return call.reservationId;
}

/** One call admitted on default for each name, in order: their reservation ids by name. */
async function admittedAs<K extends string>(h: TestAuthority, ...names: K[]) {
  const ids = {} as Record<K, string>;
  for (const name of names) ids[name] = await admitted(h);
  return ids;
}

async function moved(
  h: TestAuthority,
  reservationId: string,
  to: string,
  from: string | undefined,
  /** What attempts on `from` were billed; `answered`: the provider answered one with a 5xx. */
  fromUsedTokens?: number | 'answered',
) {
  const r = await h.client.moveCapacity({
    reservationId,
    tenant,
    model,
    ...(from ? { from } : {}),
    to,
    tokens: 500,
    ...(fromUsedTokens === undefined
      ? {}
      : fromUsedTokens === 'answered'
        ? { fromAnswered: true }
        : { fromUsedTokens }),
  });
  expect(r).toEqual({ ok: true, value: { moved: true } });
}

/** How many of the team's calls are held (in flight), as its usage reads them. */
async function held(h: TestAuthority): Promise<number> {
  const u = await h.client.usage({ tenant });
  if (!u.ok) throw new Error(u.error.message);
  return u.value.tenants.find((t) => t.tenant === tenant)?.inFlight ?? -1;
}

/** The call's close on `upstream` (where the edge says its capacity is): ok. */
async function closed(h: TestAuthority, op: 'settle' | 'release', id: string, upstream: string) {
  const call = { reservationId: id, tenant, model, upstream };
  const r =
    op === 'settle'
      ? await h.client.settle({ ...call, usage: { promptTokens: 100, completionTokens: 70 } })
      : await h.client.release({ ...call, reason: 'upstream_error' });
  expect(r.ok).toBe(true);
}

type State = Record<string, unknown>;

/** The upstreams the state has capacity keys of (`{cap:<upstream>}`). */
const keysOf = (state: State) =>
  [...new Set(Object.keys(state).flatMap((k) => /\{cap:([^}]+)\}/.exec(k)?.[1] ?? []))].sort();

const without = (s: State, what: string) =>
  Object.fromEntries(Object.entries(s).filter(([k]) => !k.includes(what)));

/**
 * A test that runs `activity` live, loses every key and rebuilds under `rebuiltUnder` (the
 * live config when absent): the rebuilt state must equal the live one key by key (less what
 * `lost` leaves out of it); `check` looks at both first.
 */
function rebuiltTest(
  name: string,
  activity: (h: TestAuthority, infra: { redis: Redis; iso: Isolation }) => Promise<void>,
  o: {
    rebuiltUnder?: unknown;
    lost?: string;
    check?: (before: State, after: State) => void;
  } = {},
) {
  test(name, async ({ start, nc, redis, iso }) => {
    const h = await start(config);
    await activity(h, { redis, iso });
    const { before, after } = await lostAndRebuilt(h, o.rebuiltUnder ?? config, { nc, redis, iso });
    o.check?.(before, after);
    expect(after).toEqual(o.lost === undefined ? before : without(before, o.lost));
  });
}

rebuiltTest(
  'a move onto a fallback that declares no capacity: rebuilt equals live, and no key is invented for it',
  async (h) => {
    const { inFlight, settled, back } = await admittedAs(h, 'inFlight', 'settled', 'back');
    h.clock.advance(2_000);
    await moved(h, inFlight, 'spare', 'default');
    await moved(h, settled, 'spare', 'default', 90);
    // Off `spare` again onto one that declares capacity: the edge names no `from` (the call
    // holds none after the move to `spare`).
    await moved(h, back, 'spare', 'default');
    h.clock.advance(1_000);
    await moved(h, back, 'backup', undefined);
    h.clock.advance(1_000);
    await closed(h, 'settle', settled, 'spare');
  },
  {
    check: (before) => expect(keysOf(before)).toEqual(['backup', 'default']),
  },
);

rebuiltTest(
  'a move that names no upstream it left (an older producer): rebuilt equals live key by key',
  async (h, { redis, iso }) => {
    const { id, other } = await admittedAs(h, 'id', 'other');
    // Holds admitted before admissions recorded their upstream (move.lua's `up`): only then
    // is a move naming none taken at its word.
    const keys = new Keys(iso.keyPrefix);
    for (const r of [id, other]) await redis.hdel(keys.reservation(tenant, r), 'up');
    h.clock.advance(2_000);
    // default's take is left as it was (its record too), the fallback's taken.
    await moved(h, id, 'backup', undefined);
    await moved(h, other, 'reserve', undefined);
    h.clock.advance(1_000);
    await closed(h, 'release', other, 'reserve');
  },
);

/** Two calls moved off default, one on again to reserve (from backup). */
async function movedTwice(h: TestAuthority) {
  const { a, b } = await admittedAs(h, 'a', 'b');
  h.clock.advance(2_000);
  await moved(h, a, 'backup', 'default');
  await moved(h, b, 'backup', 'default', 50);
  h.clock.advance(1_000);
  await moved(h, b, 'reserve', 'backup');
}

rebuiltTest(
  'a rebuild under a config that lost the fallback neither breaks nor writes a key for it',
  movedTwice,
  {
    rebuiltUnder: {
      ...config,
      upstreams: config.upstreams.filter((u) => u.id !== 'backup'),
      models: config.models.map((m) =>
        m.id === model ? { ...m, fallbackUpstreams: ['reserve', 'spare'] } : m,
      ),
    },
    lost: '{cap:backup}',
    check: (_, after) => expect(keysOf(after)).toEqual(['default', 'reserve']),
  },
);

rebuiltTest(
  'a rebuild under a config that lost the model: no capacity key at all, the budgets as live',
  movedTwice,
  {
    rebuiltUnder: {
      ...config,
      models: config.models.filter((m) => m.id !== model),
      tenants: [
        { ...config.tenants[0]!, useCases: [{ id: 'uc', maxTokens: 2_000, models: ['gpt-4o'] }] },
      ],
    },
    lost: '{cap:',
    check: (before, after) => {
      expect(keysOf(before)).toEqual(['backup', 'default', 'reserve']);
      expect(keysOf(after)).toEqual([]);
    },
  },
);

rebuiltTest(
  'moved calls that then settle, release, expire or move again (the fallback of the fallback): rebuilt equals live key by key',
  async (h) => {
    const settled = await admitted(h);
    const released = await admitted(h);
    // Its lease ends between its move (1 s on) and the closes (3 s on): at 1 s exactly the
    // sweeper could expire it before its move was asked.
    const expires = await admitted(h, 1_500);
    const twice = await admitted(h);
    const twiceSettled = await admitted(h);
    const inFlight = await admitted(h);
    h.clock.advance(1_000);
    for (const id of [settled, released, expires, twice, twiceSettled, inFlight]) {
      await moved(h, id, 'backup', 'default', id === settled ? 40 : undefined);
    }
    h.clock.advance(1_000);
    await moved(h, twice, 'reserve', 'backup');
    await moved(h, twiceSettled, 'reserve', 'backup', 30);
    h.clock.advance(1_000);
    await closed(h, 'settle', settled, 'backup');
    await closed(h, 'release', released, 'backup');
    await closed(h, 'settle', twiceSettled, 'reserve');
    // Expired here, or by the sweeper already (it runs every 100 ms): either way, no hold left.
    await waitFor(() => h.authority.relayedOrgs.includes(tenant), { what: 'relay lease' });
    await waitFor(async () => (await h.authority.expireOverdue()) === 0 && (await held(h)) === 2, {
      what: 'the hold expired',
    });
    h.clock.advance(1_000);
  },
  { check: (before) => expect(keysOf(before)).toEqual(['backup', 'default', 'reserve']) },
);

rebuiltTest(
  'a move retried or asked twice at once: live takes once, and so does the rebuild',
  async (h) => {
    const { retried, parallel } = await admittedAs(h, 'retried', 'parallel');
    await moved(h, retried, 'backup', 'default');
    h.clock.advance(2_000);
    await moved(h, retried, 'backup', 'default'); // the edge's request timed out: asked again
    await Promise.all([1, 2].map(() => moved(h, parallel, 'reserve', 'default', 20)));
    h.clock.advance(1_000);
  },
);

rebuiltTest(
  'moves after the provider answered a 5xx keep the request on the upstream left, its tokens given back: rebuilt equals live key by key',
  async (h) => {
    const { once, twice, released } = await admittedAs(h, 'once', 'twice', 'released');
    h.clock.advance(1_000);
    for (const id of [once, twice, released]) await moved(h, id, 'backup', 'default', 'answered');
    h.clock.advance(1_000);
    await moved(h, twice, 'reserve', 'backup', 'answered');
    await closed(h, 'release', released, 'backup');
    const u = await h.client.usage({});
    if (!u.ok) throw new Error(u.error.message);
    const seen = u.value.capacity.map((c) => [c.upstream, c.tokens, c.requests]);
    // default: its 3 requests counted (its account answered them), none of their tokens;
    // backup: the call still there, and the one moved on (answered there too): 2 requests.
    expect(seen).toEqual([
      ['default', 0, 3],
      ['backup', 500, 2],
      ['reserve', 500, 1],
    ]);
  },
);
