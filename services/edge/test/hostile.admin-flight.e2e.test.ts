import { setTimeout as sleep } from 'node:timers/promises';
import { expect, onTestFinished } from 'vitest';
import { startEdge } from '../src/index.js';
import { startTestAuthority } from '@holdfast/budget-authority/testing';
import { admin, ADMIN_TOKEN, withAdmin } from './admin.js';
import { expectLimitHeld } from './books.js';
import { chat, edgeTest as test, entry, KEYS, UNREAD_AT_HANGUP } from './harness.js';

/**
 * Admin changes while calls are in flight, through the HTTP admin API of two edges, with two
 * authority replicas: the mode switched reserve -> adaptive -> reserve -> adaptive -> reserve,
 * the limit lowered below what was spent and raised, the month switched to calendar, a shadow
 * budget enforced, the model's price changed, and a second admin editing at the same moment.
 * Billed never passes the limit, nothing stays held, every admission is closed by one event,
 * and the books agree with what the model billed.
 */

const TEAM = 'batch-summariser';
/** The month limit at the end (it starts lower, and is lowered below use and raised on the way). */
const LIMIT = 12_000;
const CLOSES = ['reservation.settled', 'reservation.released', 'reservation.expired'];

const TITLE =
  '24 calls at a time through two edges and two authorities while admins change the team: billed stays within the limit, nothing stays held, the books agree';

test(TITLE, async ({ stack, nc, natsUrl, redisUrl, iso }) => {
  const s = await stack(
    withAdmin({
      behaviour: { tokenDelayMs: 2 },
      patch: (c) => {
        entry(c.tenants, TEAM).budgets = [
          { window: 'month', limit: 4_000, unit: 'tokens' },
          { window: 'day', limit: 1_000_000, unit: 'tokens', enforce: false },
        ];
        entry(c.tenants, TEAM).maxInFlight = 64;
      },
    }),
  );
  // A second replica on the same Redis and names: the edges' calls go to either.
  const { names, keyPrefix } = iso;
  const second = await startTestAuthority({
    natsUrl,
    redisUrl,
    nc,
    names,
    keyPrefix,
    clock: false,
  });
  onTestFinished(() => second.stop());
  const other = await startEdge({
    nc,
    names: iso.names,
    options: { adminToken: ADMIN_TOKEN, admitTimeoutMs: 10_000 },
  });
  onTestFinished(() => other.stop());
  const edges = [s.edge.url, other.url];
  const admins = [admin(s), admin({ ...s, edge: other })];

  let running = true;
  const statuses = new Map<number, number>();
  const worker = async (i: number) => {
    for (let n = 0; running; n++) {
      const body = chat(20, { max_tokens: 50 + ((i * 37 + n * 11) % 350), stream: n % 2 === 0 });
      const res = await fetch(`${edges[(i + n) % 2]}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEYS.batch}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      await res.text();
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      if (res.status === 429) await sleep(20);
    }
  };
  const workers = Array.from({ length: 24 }, (_, i) => worker(i));

  const team = `/admin/tenants/${TEAM}`;
  const month = `${team}/budgets/month-tokens`;
  const changes: Array<[number, 'PATCH' | 'PUT', string, Record<string, unknown>]> = [
    [0, 'PATCH', team, { mode: 'adaptive' }],
    [1, 'PATCH', team, { maxInFlight: 48 }],
    // Below what was spent by now, then above it.
    [0, 'PUT', month, { limit: 2_000 }],
    [1, 'PATCH', team, { mode: 'reserve' }],
    [0, 'PUT', month, { limit: 8_000, calendar: true }],
    [1, 'PUT', `${team}/budgets/day-tokens`, { limit: 1_000_000, enforce: true }],
    [0, 'PATCH', team, { mode: 'adaptive' }],
    [1, 'PUT', '/admin/models/gpt-4o-mini/price', { inputPerMTok: 1.5, outputPerMTok: 6 }],
    [0, 'PUT', month, { limit: LIMIT, calendar: true }],
    [1, 'PATCH', team, { mode: 'reserve' }],
  ];
  for (const [at, method, url, body] of changes) {
    await sleep(300);
    // A second admin edits at the same moment on the other edge: both land.
    const [r, raced] = await Promise.all([
      admins[at]!(method, url, body),
      admins[1 - at]!('PATCH', team, { priority: 'normal' }),
    ]);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(raced.status, JSON.stringify(raced.body)).toBe(200);
  }
  await sleep(1_500);
  running = false;
  await Promise.all(workers);

  expect([...statuses.keys()].sort(), JSON.stringify([...statuses])).toEqual([200, 429]);
  const u = await s.settled(TEAM);
  for (const w of u.windows) expect(w.held).toBe(0);
  const events = await s.events((es) => {
    const created = es.filter((e) => e.type === 'reservation.created').length;
    return created > 0 && created === es.filter((e) => CLOSES.includes(e.type)).length;
  });
  const ids = (types: string[]) =>
    new Set(
      events.flatMap((e) =>
        types.includes(e.type) && 'reservationId' in e ? [e.reservationId] : [],
      ),
    );
  expect(ids(CLOSES)).toEqual(ids(['reservation.created']));
  expect(events.filter((e) => CLOSES.includes(e.type))).toHaveLength(ids(CLOSES).size);
  // The books: Holdfast's settlements are its windows' usage, and each call's agrees with what
  // the model billed, but for the tokens written into a connection the edge had hung up on (a
  // call cut at the end of its hold: docs/budgets.md, "What Holdfast cannot see").
  const settled = new Map(
    events.flatMap((e) =>
      e.type === 'reservation.settled' ? [[e.reservationId, e] as const] : [],
    ),
  );
  const booked = [...settled.values()].reduce((n, e) => n + e.billedTokens, 0);
  expect(u.billedTokens).toBe(booked);
  expect(events.filter((e) => e.type === 'reservation.overrun')).toEqual([]);
  const calls = s.upstream.stats().recent;
  for (const c of calls) {
    const e = settled.get(c.clientRequestId ?? '');
    const unread = c.promptTokens + c.completionTokens - (e?.billedTokens ?? 0);
    // Unread only where the edge hung up: the model saw it (aborted), or the edge cut the call
    // at its hold (budget_exhausted) after a zero-latency mock had written its last bytes.
    if (unread > 0)
      expect(
        c.outcome === 'aborted' || e?.outcome === 'budget_exhausted',
        `${c.clientRequestId ?? ''}: ${c.outcome}, settled ${e?.outcome}`,
      ).toBe(true);
    expect(unread, c.clientRequestId ?? '').toBeLessThanOrEqual(UNREAD_AT_HANGUP);
  }
  const unread = calls.reduce((n, c) => {
    const e = settled.get(c.clientRequestId ?? '');
    return n + Math.max(0, c.promptTokens + c.completionTokens - (e?.billedTokens ?? 0));
  }, 0);
  expectLimitHeld([TEAM], LIMIT, {
    holdfast: () => booked,
    provider: () => calls.reduce((n, c) => n + c.promptTokens + c.completionTokens, 0),
    unread: () => unread,
  });
});
