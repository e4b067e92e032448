import { randomUUID } from 'node:crypto';
import { windowBounds, type BudgetWindow, type HoldfastEvent } from '@holdfast/events';
import { waitFor } from '@holdfast/testkit';
import { describe, expect } from 'vitest';
import {
  admissionOf,
  BASE_CONFIG,
  newId,
  quiescent,
  readEvents,
  refusalOf,
  authorityTest as test,
} from './harness.js';
import { startTestAuthority } from '../src/testing.js';

/**
 * Issue 11 at the authority: admin actions that compose, no cheap denial of service, one clock.
 * Real Redis and NATS.
 */

const team = (over: Record<string, unknown> = {}) => ({
  ...BASE_CONFIG,
  tenants: [
    {
      id: 'team',
      budgets: [{ window: 'month', limit: 10_000, unit: 'tokens' }],
      useCases: [{ id: 'uc', maxTokens: 1_000_000, models: ['gpt-4o-mini', 'free-output'] }],
      ...over,
    },
  ],
  models: [
    ...BASE_CONFIG.models,
    {
      id: 'free-output',
      upstream: 'default',
      maxOutputTokens: 1_000_000,
      price: { inputPerMTok: 1, outputPerMTok: 0 },
    },
  ],
});

const call = (over: Record<string, unknown> = {}) => ({
  reservationId: newId(),
  tenant: 'team',
  keyId: null,
  useCase: 'uc',
  model: 'gpt-4o-mini',
  promptTokens: 100,
  maxTokens: 100,
  ...over,
});

/** The refusals the events stand for: a summary counts for its `count`. */
function refusalsCounted(events: HoldfastEvent[]): number {
  let n = 0;
  for (const e of events) if (e.type === 'admission.refused') n += e.count;
  return n;
}

describe('suspensions have owners', () => {
  test("the alerter's automatic resume never lifts an admin's suspension", async ({
    start,
    nc,
    iso,
  }) => {
    const h = await start(team());
    const suspend = (by: 'alerter' | 'admin') =>
      h.client.suspend({ tenant: 'team', reason: 'test', by });
    expect(await suspend('alerter')).toMatchObject({
      ok: true,
      value: { suspendedBy: ['alerter'] },
    });
    expect(await suspend('admin')).toMatchObject({
      ok: true,
      value: { changed: true, suspendedBy: ['alerter', 'admin'] },
    });
    // The window freed room: the alerter lifts its own suspension, the admin's stays.
    const auto = await h.client.resume({ tenant: 'team', by: 'window_freed' });
    expect(auto).toMatchObject({ ok: true, value: { suspended: true, suspendedBy: ['admin'] } });
    expect(refusalOf(await h.client.admit(call()))).toMatchObject({ code: 'tenant_suspended' });
    // Only one resume event: when the admin lifts the last suspension.
    expect(await h.client.resume({ tenant: 'team', by: 'admin' })).toMatchObject({
      ok: true,
      value: { suspended: false, suspendedBy: [] },
    });
    admissionOf(await h.client.admit(call()));
    const events = await waitFor(async () => {
      const e = await readEvents(nc, iso.names);
      return e.some((x) => x.type === 'reservation.created') ? e : undefined;
    });
    expect(events.filter((e) => e.type === 'tenant.resumed')).toHaveLength(1);
    expect(events.filter((e) => e.type === 'tenant.suspended').map((e) => e.by)).toEqual([
      'alerter',
      'admin',
    ]);
  });
});

describe('no cheap denial of service', () => {
  test('shrink to fit is closed form: a million-token max with a free output price admits at once', async ({
    start,
    redis,
  }) => {
    const h = await start(
      team({
        shrinkToFit: { minOutputTokens: 10 },
        budgets: [{ window: 'month', limit: 5, unit: 'usd' }],
      }),
    );
    await redis.call('CONFIG', 'RESETSTAT');
    // The prompt costs $4 of the $5; output is free: any max_tokens fits.
    const a = admissionOf(
      await h.client.admit(
        call({ model: 'free-output', promptTokens: 4_000_000, maxTokens: 1_000_000 }),
      ),
    );
    expect(a.maxTokens).toBe(1_000_000);
    // A prompt over the budget: refused, not searched for.
    refusalOf(
      await h.client.admit(
        call({ model: 'free-output', promptTokens: 2_000_000, maxTokens: 1_000_000 }),
      ),
    );
    // Before: 856 ms of Lua stepping max_tokens down one at a time, stalling every tenant.
    const stats = String(await redis.call('INFO', 'commandstats'));
    const usec = /cmdstat_fcall:calls=(\d+),usec=(\d+)/.exec(stats);
    expect(Number(usec?.[2]) / Number(usec?.[1])).toBeLessThan(5_000);
  });

  test('refusals past the event rate are summarised: every one is counted, few events are written', async ({
    start,
    redis,
    nc,
    iso,
  }) => {
    const h = await start(team({ refusalEventsPerSecond: 5 }));
    const n = 300;
    const replies = await Promise.all(
      Array.from({ length: n }, () => h.client.admit(call({ promptTokens: 20_000 }))),
    );
    expect(replies.every((r) => r.ok && !r.value.admitted)).toBe(true);
    await quiescent(h.client, redis, iso.keyPrefix);
    const refusals = (await readEvents(nc, iso.names)).filter(
      (e) => e.type === 'admission.refused',
    );
    const counted = refusalsCounted(refusals);
    expect(counted).toBe(n);
    // The clock does not move in this test: one second, five full events and the summaries.
    expect(refusals.length).toBeLessThan(20);
    expect(refusals.some((e) => e.type === 'admission.refused' && e.count > 1)).toBe(true);
  });
});

test('refusals decided before any budget is read (an unregistered use case, an unknown model) are rate limited too, whatever name each call makes up', async ({
  start,
  redis,
  nc,
  iso,
}) => {
  // Made-up names are one summary kind: before, the kind carried the name as sent, so a client
  // naming a new model or use case on every call had an event per refusal (600 of 600), and
  // the summary hash a field pair per name (refusals.lua reads it whole on every flush call).
  const h = await start(team({ refusalEventsPerSecond: 5 }));
  const n = 200;
  await Promise.all([
    ...Array.from({ length: n }, () => h.client.admit(call({ useCase: 'nope' }))),
    ...Array.from({ length: n }, (_, i) => h.client.admit(call({ useCase: `nope-${i}` }))),
    ...Array.from({ length: n }, (_, i) => h.client.admit(call({ model: `no-model-${i}` }))),
  ]);
  await quiescent(h.client, redis, iso.keyPrefix);
  const refusals = (await readEvents(nc, iso.names)).filter((e) => e.type === 'admission.refused');
  expect(refusalsCounted(refusals)).toBe(3 * n);
  expect(refusals.length).toBeLessThan(20);
  // One summary a code, with the last refusal's fields: the name it was sent with.
  const summaries = refusals.flatMap((e) =>
    e.type === 'admission.refused' && e.count > 1 ? [e] : [],
  );
  expect(summaries.map((e) => e.code).sort()).toEqual([
    'model_not_allowed',
    'use_case_not_registered',
  ]);
  for (const e of summaries) {
    const name = e.code === 'model_not_allowed' ? e.model : e.useCase;
    expect(name).toMatch(/^(no-model-|nope)/);
  }
});

describe('one clock', () => {
  test('every window decision uses Redis time: a replica whose clock runs an hour fast changes nothing', async ({
    redisUrl,
    nc: conn,
    natsUrl,
    iso,
  }) => {
    const h = await startTestAuthority({
      natsUrl,
      redisUrl,
      nc: conn,
      names: iso.names,
      keyPrefix: iso.keyPrefix,
      config: team({ budgets: [{ window: 'minute', limit: 1_000 }] }),
      clock: false,
    });
    const skewed = await startTestAuthority({
      natsUrl,
      redisUrl,
      nc: conn,
      names: iso.names,
      keyPrefix: iso.keyPrefix,
      config: team({ budgets: [{ window: 'minute', limit: 1_000 }] }),
      clock: false,
      now: () => Date.now() + 3_600_000,
    });
    try {
      const reservationId = randomUUID();
      const held = admissionOf(await h.client.admit(call({ reservationId, leaseMs: 60_000 })));
      // The skewed replica sweeps for overdue holds with its own clock: close.lua re-checks
      // the lease against Redis time, so the hold is not expired an hour early.
      expect(await skewed.authority.expireOverdue()).toBe(0);
      const usage = await skewed.client.usage({ tenant: 'team' });
      expect(usage.ok && usage.value.tenants[0]!.windows[0]).toMatchObject({ held: 200 });
      // Its admissions slide the minute window by Redis time too: the hold is still in it.
      const second = admissionOf(await skewed.client.admit(call({ maxTokens: 100 })));
      expect(second.windows[0]).toMatchObject({ held: 400 });
      expect(Date.parse(held.expiresAt) - Date.now()).toBeLessThan(61_000);
    } finally {
      await skewed.stop();
      await h.stop();
    }
  });

  test("the scripts' window bounds equal @holdfast/events' for every window kind, month ends included", async ({
    redis,
  }) => {
    const script = `
      ${lib}
      local now = tonumber(ARGV[1])
      local out = {}
      for _, w in ipairs({'minute', 'day', 'month'}) do
        local b = windowBounds(now, w, false)
        out[#out + 1] = b[1] .. ',' .. b[2]
      end
      local c = windowBounds(now, 'month', true)
      out[#out + 1] = c[1] .. ',' .. c[2] .. ',' .. nextMonthMs(now)
      return out`;
    const instants = [
      Date.UTC(2026, 11, 31, 23, 59, 59, 999),
      Date.UTC(2027, 0, 1),
      Date.UTC(2028, 1, 29, 12),
      Date.UTC(2100, 1, 28, 23, 59, 59),
      Date.UTC(2000, 1, 29),
      ...Array.from({ length: 40 }, (_, i) => Date.UTC(2026, 0, 1) + i * 9_876_543_210),
    ];
    for (const now of instants) {
      const got = (await redis.eval(script, 0, String(now))) as string[];
      const want = (['minute', 'day', 'month'] as BudgetWindow[]).map((w) => {
        const b = windowBounds(w, now);
        return `${b.currentBucket},${b.startBucket}`;
      });
      const cal = windowBounds('month', now, true);
      const d = new Date(now);
      want.push(
        `${cal.currentBucket},${cal.startBucket},${Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1)}`,
      );
      expect(got, new Date(now).toISOString()).toEqual(want);
    }
  });
});

const lib = await import('node:fs').then((fs) =>
  fs.readFileSync(new URL('../src/lua/lib.lua', import.meta.url), 'utf8'),
);

test('the lease index carries every hold: it drains with the holds', async ({
  start,
  redis,
  iso,
}) => {
  const h = await start(team());
  const ids = await Promise.all(
    [1, 2, 3].map(async () => admissionOf(await h.client.admit(call())).reservationId),
  );
  // The root level's in-flight set is the org's lease index (issue 14): no other key.
  const index = `${iso.keyPrefix}:{team}:t:team:holds`;
  expect(await redis.zcard(index)).toBe(3);
  expect(await redis.exists(`${iso.keyPrefix}:{team}:leases`)).toBe(0);
  for (const reservationId of ids) {
    await h.client.settle({
      reservationId,
      tenant: 'team',
      usage: { promptTokens: 10, completionTokens: 5 },
    });
  }
  await waitFor(async () => (await redis.zcard(index)) === 0, { what: 'the index empty' });
});

/** An org above the team: the team's set and the org's (the lease index) are two keys. */
const orgAndTeam = () => {
  const base = team();
  return {
    ...base,
    tenants: [
      { id: 'acme', budgets: [{ window: 'month', limit: 100_000, unit: 'tokens' }] },
      { ...base.tenants[0]!, parent: 'acme' },
    ],
  };
};

test("a hold an older authority admitted (also in the org's old `leases` index) settles and expires under this one, and the old index drains", async ({
  start,
  redis,
  nc,
  iso,
}) => {
  const h = await start(orgAndTeam());
  const [settled, abandoned] = await Promise.all(
    [1, 2].map(async () => admissionOf(await h.client.admit(call())).reservationId),
  );
  const index = `${iso.keyPrefix}:{acme}:t:acme:holds`;
  const teamSet = `${iso.keyPrefix}:{acme}:t:team:holds`;
  const old = `${iso.keyPrefix}:{acme}:leases`;
  // What an older admit left: the same member with the same score in the old index too.
  for (const id of [settled!, abandoned!]) {
    expect(await redis.zscore(teamSet, id)).toBe(await redis.zscore(index, id));
    await redis.zadd(old, Number(await redis.zscore(index, id)), id);
  }
  expect(await redis.zcard(index)).toBe(2);

  await h.client.settle({
    reservationId: settled!,
    tenant: 'team',
    usage: { promptTokens: 100, completionTokens: 5 },
  });
  expect(await redis.zrange(index, 0, -1)).toEqual([abandoned]);
  expect(await redis.zrange(teamSet, 0, -1)).toEqual([abandoned]);

  // Past the lease: the sweeper expires the abandoned hold once (found in both indexes) and
  // takes both ids out of the old index, the settled one too.
  h.clock.advance(31 * 60_000);
  await waitFor(async () => (await redis.exists(old, index, teamSet)) === 0, {
    what: 'every index drained',
  });
  const closed = async () =>
    (await readEvents(nc, iso.names))
      .filter((e) => e.type === 'reservation.settled' || e.type === 'reservation.expired')
      .map((e) => [e.type, 'reservationId' in e ? e.reservationId : ''])
      .sort();
  await waitFor(async () => (await closed()).length >= 2, { what: 'both closes relayed' });
  expect(await closed()).toEqual(
    [
      ['reservation.expired', abandoned],
      ['reservation.settled', settled],
    ].sort(),
  );
  const window = await redis.hget(`${iso.keyPrefix}:{acme}:t:team:w:month-tokens`, 'h');
  expect(Number(window ?? 0)).toBe(0);
});

describe('refusals an edge answered itself (refusals.report)', () => {
  test('a budget refusal carries its summary; a report counts into one event per kind, once per item id', async ({
    start,
    redis,
    nc,
    iso,
  }) => {
    const h = await start(team({ refusalEventsPerSecond: 5 }));
    const refused = refusalOf(await h.client.admit(call({ promptTokens: 20_000 })));
    expect(refused.code).toBe('budget_exceeded');
    const summary = refused.summary!;
    expect(summary.kind.startsWith('team|budget_exceeded|')).toBe(true);
    expect(JSON.parse(summary.fields)).toEqual(
      expect.arrayContaining(['type', 'admission.refused', 'tenant', 'team', 'shadow', '0']),
    );
    // So does a use case the team does not have (an edge remembers it until a config), under
    // '*' for the name the client made up; a tenant not in the config carries none.
    const unregistered = refusalOf(await h.client.admit(call({ useCase: 'nope' })));
    expect(unregistered.summary?.kind).toMatch(/^team\|use_case_not_registered\|\|\|\*\|/);
    expect(refusalOf(await h.client.admit(call({ tenant: 'ghost' }))).summary).toBeUndefined();

    const item = { id: randomUUID(), tenant: 'team', ...summary, count: 41 };
    const first = await h.client.reportRefusals({ items: [item] });
    // The same item again (its reply was lost, the edge sent it again): counted once.
    const again = await h.client.reportRefusals({ items: [item] });
    expect(first.ok && again.ok).toBe(true);
    const more = { ...item, id: randomUUID(), count: 2 };
    expect((await h.client.reportRefusals({ items: [more] })).ok).toBe(true);
    await quiescent(h.client, redis, iso.keyPrefix);
    const budget = (await readEvents(nc, iso.names)).filter(
      (e) => e.type === 'admission.refused' && e.code === 'budget_exceeded',
    );
    // The authority's own refusal, then the 43 reported as summaries of its kind.
    expect(refusalsCounted(budget)).toBe(44);
    expect(budget.length).toBeLessThanOrEqual(3);
  });

  // A flush call reads the org's whole summary hash: the sweep sizes it by the hash's length
  // (before, calls of 32 kinds each read it again: 1,000 kinds 22-27 ms a flush, now 3-5).
  test('summaries past one flush call are written, each once', async ({
    start,
    redis,
    nc,
    iso,
  }) => {
    const h = await start(team({ refusalEventsPerSecond: 1 }));
    const summary = refusalOf(await h.client.admit(call({ promptTokens: 20_000 }))).summary!;
    const kinds = 1_100;
    for (let at = 0; at < kinds; at += 256) {
      const items = Array.from({ length: Math.min(256, kinds - at) }, (_, i) => ({
        id: randomUUID(),
        tenant: 'team',
        ...summary,
        kind: `${summary.kind}|${at + i}`,
        count: 3,
      }));
      const reported = await h.client.reportRefusals({ items });
      expect(reported.ok && reported.value.recorded).toBe(items.length);
    }
    await quiescent(h.client, redis, iso.keyPrefix);
    const events = (await readEvents(nc, iso.names)).filter((e) => e.type === 'admission.refused');
    // The authority's own refusal, then one event a kind.
    expect(events).toHaveLength(1 + kinds);
    expect(refusalsCounted(events)).toBe(1 + 3 * kinds);
  });

  test('a refusal at a cap on calls in flight carries its summary too, and a report counts it', async ({
    start,
    redis,
    nc,
    iso,
  }) => {
    const h = await start(team({ maxInFlight: 1 }));
    const held = call({ leaseMs: 60_000 });
    admissionOf(await h.client.admit(held));
    const refused = refusalOf(await h.client.admit(call()));
    expect(refused.code).toBe('concurrency_limit');
    const summary = refused.summary!;
    expect(summary.kind.startsWith('team|concurrency_limit|')).toBe(true);
    const r = await h.client.reportRefusals({
      items: [{ id: randomUUID(), tenant: 'team', ...summary, count: 9 }],
    });
    expect(r.ok && r.value.recorded).toBe(1);
    await h.client.release({
      reservationId: held.reservationId,
      tenant: 'team',
      reason: 'client_disconnected',
    });
    await quiescent(h.client, redis, iso.keyPrefix);
    const events = (await readEvents(nc, iso.names)).filter(
      (e) => e.type === 'admission.refused' && e.code === 'concurrency_limit',
    );
    expect(refusalsCounted(events)).toBe(10);
  });

  test('a report of a tenant removed from the config since the edge refused (an admin change racing it) counts into the org the edge names; without one it is dropped', async ({
    start,
    redis,
    nc,
    iso,
  }) => {
    const both = {
      ...team(),
      tenants: [...team().tenants, { ...team().tenants[0]!, id: 'other' }],
    };
    const h = await start(both);
    const refused = refusalOf(await h.client.admit(call({ promptTokens: 20_000 })));
    // `team` leaves the config before the edge's report arrives.
    const applied = await h.client.configApply({
      document: JSON.stringify({ ...both, tenants: both.tenants.filter((t) => t.id !== 'team') }),
    });
    expect(applied.ok).toBe(true);
    const item = { tenant: 'team', ...refused.summary!, count: 17 };
    const r = await h.client.reportRefusals({
      items: [
        { ...item, id: randomUUID(), org: 'team' },
        // An older edge's item names no org: nowhere to count it.
        { ...item, id: randomUUID() },
      ],
    });
    expect(r.ok && r.value.recorded).toBe(1);
    await quiescent(h.client, redis, iso.keyPrefix);
    const events = (await readEvents(nc, iso.names)).filter(
      (e) => e.type === 'admission.refused' && e.tenant === 'team',
    );
    expect(refusalsCounted(events)).toBe(1 + 17);
  });

  test('items that are not a budget refusal of their own tenant are dropped, never written', async ({
    start,
    redis,
    nc,
    iso,
  }) => {
    const h = await start({
      ...team(),
      tenants: [...team().tenants, { ...team().tenants[0]!, id: 'other' }],
    });
    const refused = refusalOf(await h.client.admit(call({ promptTokens: 20_000 })));
    const { kind, fields } = refused.summary!;
    const list = JSON.parse(fields) as string[];
    const swap = (name: string, value: string) =>
      JSON.stringify(list.map((v, i) => (i > 0 && list[i - 1] === name ? value : v)));
    const bad = [
      { tenant: 'other', kind, fields },
      { tenant: 'team', kind: kind.replace('budget_exceeded', 'concurrency_limit'), fields },
      { tenant: 'team', kind, fields: swap('tenant', 'other') },
      { tenant: 'team', kind, fields: swap('shadow', '1') },
      { tenant: 'team', kind, fields: swap('type', 'reservation.settled') },
      { tenant: 'team', kind, fields: '{"not":"a list"}' },
      { tenant: 'team', kind, fields: '[1,2]' },
      { tenant: 'team', kind, fields: 'not json' },
      { tenant: 'gone', kind: kind.replace('team', 'gone'), fields },
    ].map((b) => ({ ...b, id: randomUUID(), count: 1_000 }));
    const r = await h.client.reportRefusals({ items: bad });
    expect(r.ok && r.value.recorded).toBe(0);
    // Out of the schema: refused whole.
    const negative = await h.client.reportRefusals({
      items: [{ id: randomUUID(), tenant: 'team', kind, fields, count: -1 }],
    });
    expect(negative.ok).toBe(false);
    await quiescent(h.client, redis, iso.keyPrefix);
    const events = (await readEvents(nc, iso.names)).filter((e) => e.type === 'admission.refused');
    expect(refusalsCounted(events)).toBe(1);
  });
});
