import { randomUUID } from 'node:crypto';
import type { AuthorityClient } from '@holdfast/runtime';
import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { HoldfastEvent, type WindowState } from '@holdfast/events';
import { auditTest as test, CONFIG } from '../test/audit-stack.js';
import { publishEvents, settledCall, window } from '../test/events.js';
import { runAudit, windowSums, type AuditReport } from './audit.js';
import type { SqlExecutor } from './clickhouse.js';
import { qualified, sql } from './sql.js';

const KEY = { id: 'k1', sha256: 'a'.repeat(64) };
const DAY = { window: 'day', limit: 1_000_000 };

/** CONFIG with team-a's key; `added`: day budgets for acme, team-a, its key and end users. */
function config(added: boolean) {
  return {
    ...CONFIG,
    tenants: CONFIG.tenants.map((t) => {
      if (t.id === 'acme' && added) {
        return { ...t, budgets: [...t.budgets, DAY, { window: 'day', limit: 100, unit: 'usd' }] };
      }
      if (t.id !== 'team-a') return t;
      if (!added) return { ...t, keys: [KEY] };
      return {
        ...t,
        budgets: [...t.budgets, DAY],
        keys: [{ ...KEY, budgets: [DAY] }],
        endUserBudgets: [DAY],
      };
    }),
  };
}

interface Call {
  tenant: string;
  prompt: number;
  leaseMs?: number;
  /** team-a's key k1 and end user u1. */
  subjects?: boolean;
}

async function admit(client: AuthorityClient, c: Call): Promise<string> {
  const reservationId = randomUUID();
  const r = await client.admit({
    reservationId,
    tenant: c.tenant,
    keyId: c.subjects ? KEY.id : null,
    ...(c.subjects ? { endUser: 'u1' } : {}),
    useCase: 'uc',
    model: 'gpt-4o-mini',
    promptTokens: c.prompt,
    maxTokens: 200,
    ...(c.leaseMs ? { leaseMs: c.leaseMs } : {}),
  });
  if (!r.ok || !r.value.admitted) throw new Error(`not admitted: ${JSON.stringify(r)}`);
  return reservationId;
}

/** Settles with `out` completion tokens; `org`: the admission's (a moved or removed tenant). */
async function settle(
  client: AuthorityClient,
  reservationId: string,
  c: Call,
  out: number,
  org?: string,
) {
  const s = await client.settle({
    reservationId,
    tenant: c.tenant,
    ...(org ? { org } : {}),
    usage: { promptTokens: c.prompt, completionTokens: out },
  });
  if (!s.ok || s.value.status !== 'settled') throw new Error(JSON.stringify(s));
}

/** The audit once every counter balances (or the last one after 30 s), and a row finder. */
async function audited(client: AuthorityClient, ch: SqlExecutor, database: string) {
  let report: AuditReport | undefined;
  await waitFor(
    async () => {
      const r = await runAudit({ ch, database, authority: client });
      report = r.ok ? r.value : undefined;
      return report?.rows.every((row) => row.drift === 0);
    },
    { timeoutMs: 30_000, what: 'zero drift per window' },
  ).catch(() => undefined);
  if (!report) throw new Error('no report');
  const rows = report.rows;
  const row = (tenant: string, counter: string) =>
    rows.find((r) => r.tenant === tenant && r.counter === counter);
  return { report, row };
}

/** The `reservation.expired` rows of a call, once there. */
async function expiredRows(ch: SqlExecutor, database: string, reservationId: string) {
  const read = () =>
    ch.query<Record<string, unknown>>(
      sql`SELECT w_level, w_budget, w_charged, w_removed FROM ${qualified(database, 'events_raw_v1')} FINAL WHERE reservation_id = ${reservationId} AND type = 'reservation.expired'`,
    );
  await waitFor(async () => (await read()).length === 1, {
    timeoutMs: 15_000,
    what: 'the held call expired',
  });
  return read();
}

test('drift audit per window: budgets added mid-window and while calls are held (one settled, one expired) show no drift, key and end-user windows included', async ({
  audited: { client },
  ch,
  iso,
}) => {
  expect((await client.configApply({ document: config(false), source: 'test' })).ok).toBe(true);
  // Billed before the new budgets exist: in the tenants' lifetime, in none of the new windows.
  const first = { tenant: 'team-a', prompt: 400, subjects: true };
  await settle(client, await admit(client, first), first, 150);
  // Held while the budgets are added: X settles (the new windows are billed its whole usage,
  // its event's own charge is what passed the hold), Y's lease runs out (reserve bills the
  // old windows its worst case, the new ones nothing).
  const x = { tenant: 'team-a', prompt: 300, subjects: true };
  const y = { tenant: 'team-a', prompt: 250, subjects: true, leaseMs: 1_000 };
  const [xId, yId] = [await admit(client, x), await admit(client, y)];
  const applied = await client.configApply({ document: config(true), source: 'test: add' });
  expect(applied.ok).toBe(true);
  await settle(client, xId, x, 90);
  const [expired] = await expiredRows(ch, iso.database, yId);
  // After: a call billed into every window, the key's and the end user's.
  const last = { tenant: 'team-a', prompt: 120, subjects: true };
  await settle(client, await admit(client, last), last, 30);

  const { report, row } = await audited(client, ch, iso.database);
  expect(report.rows.filter((r) => r.drift !== 0)).toEqual([]);
  // The added windows hold X's whole usage and the call after, not what came before them.
  expect(row('team-a', 'day-tokens')).toMatchObject({ authority: 390 + 150, drift: 0 });
  expect(row('acme', 'day-tokens')).toMatchObject({ authority: 390 + 150, drift: 0 });
  expect(row('acme', 'day-usd')?.authority).toBeGreaterThan(0);
  expect(row('team-a/key:k1', 'day-tokens')).toMatchObject({ drift: 0 });
  expect(row('team-a/key:k1', 'day-tokens')?.authority).toBeGreaterThan(0);
  expect(row('team-a/user:u1', 'day-tokens')).toMatchObject({ drift: 0 });
  expect(row('team-a/user:u1', 'day-tokens')?.authority).toBeGreaterThan(0);
  // The windows that were there all along, and the lifetime totals, still balance.
  expect(row('team-a', 'lifetime-tokens')).toMatchObject({ drift: 0 });
  expect(row('acme', 'month-tokens')?.authority).toBeGreaterThan(
    row('acme', 'day-tokens')!.authority,
  );
  expect(report.maxDrift).toEqual({ tokens: 0, usd: 0 });
  // Y's expiry billed its worst case to the windows it was held on, nothing to the new ones.
  const charged = (r: Record<string, unknown>) =>
    Object.fromEntries(
      (r.w_level as string[]).map((l, i) => [
        `${l}/${(r.w_budget as string[])[i]}`,
        Number((r.w_charged as unknown[])[i]),
      ]),
    );
  expect(charged(expired!)).toMatchObject({
    'team-a/minute-tokens': 250 + 200,
    'acme/month-tokens': 250 + 200,
    'team-a/day-tokens': 0,
    'acme/day-tokens': 0,
    'acme/day-usd': 0,
    'team-a/key:k1/day-tokens': 0,
    'team-a/user:u1/day-tokens': 0,
  });
});

test('drift audit per window: a team removed and a team moved to another org while their calls are held balance (their closes list the windows their holds were on, as removed)', async ({
  audited: { client },
  ch,
  iso,
}) => {
  // team-a billed in acme before it moves (its lifetime and windows stay in acme's slot).
  const before = { tenant: 'team-a', prompt: 100 };
  await settle(client, await admit(client, before), before, 20);
  // Held across the change: team-b's (estimate: its prompt charged at admission) is settled
  // after team-b left the config, team-a's after it moved under solo, one of team-a's expires.
  const b = { tenant: 'team-b', prompt: 300 };
  const a = { tenant: 'team-a', prompt: 200 };
  const [bId, aId] = [await admit(client, b), await admit(client, a)];
  const expiring = await admit(client, { tenant: 'team-a', prompt: 250, leaseMs: 1_000 });
  const document = {
    ...CONFIG,
    tenants: CONFIG.tenants
      .filter((t) => t.id !== 'team-b')
      .map((t) => (t.id === 'team-a' ? { ...t, parent: 'solo' } : t)),
  };
  expect((await client.configApply({ document, source: 'test: move and remove' })).ok).toBe(true);
  await settle(client, bId, b, 77, 'acme');
  await settle(client, aId, a, 11, 'acme');
  await expiredRows(ch, iso.database, expiring);
  // In solo now: billed there from here on.
  const after = { tenant: 'team-a', prompt: 50 };
  await settle(client, await admit(client, after), after, 5);

  const { report, row } = await audited(client, ch, iso.database);
  expect(report.rows.filter((r) => r.drift !== 0)).toEqual([]);
  // acme's month: team-a's call before the move, both held calls, the expiry's worst case.
  expect(row('acme', 'month-tokens')?.authority).toBe(120 + 377 + 211 + 450);
  // team-a's lifetime lives in its org's slot: in solo, only what it billed there.
  expect(row('team-a', 'lifetime-tokens')?.authority).toBe(55);
  expect(row('solo', 'lifetime-tokens')?.authority).toBe(55);
  expect(report.maxDrift).toEqual({ tokens: 0, usd: 0 });
});

test('drift audit per window: day budgets of a team, its key and its end users removed while calls are held (settled, released, expired), then added back, show no drift', async ({
  audited: { client },
  ch,
  iso,
}) => {
  /** Applies config(`added`): team-a's, acme's, k1's and the end users' day budgets or not. */
  const applied = async (added: boolean) =>
    (await client.configApply({ document: config(added), source: `test: ${added}` })).ok;
  expect(await applied(true)).toBe(true);
  const s = { tenant: 'team-a', prompt: 300, subjects: true };
  const r = { tenant: 'team-a', prompt: 200, subjects: true };
  const x = { tenant: 'team-a', prompt: 250, subjects: true, leaseMs: 1_000 };
  const [sId, rId, xId] = [await admit(client, s), await admit(client, r), await admit(client, x)];
  // The day budgets go (acme's and team-a's own, its key's, its end users'), the calls close.
  expect(await applied(false)).toBe(true);
  await settle(client, sId, s, 77);
  const released = await client.release({
    reservationId: rId,
    tenant: 'team-a',
    reason: 'client_disconnected',
  });
  expect(released).toMatchObject({ ok: true, value: { status: 'released' } });
  const [expired] = await expiredRows(ch, iso.database, xId);
  // The expiry lists the windows it billed, the removed ones flagged (w_removed).
  const removed = (expired!.w_removed as unknown[]).map(Number);
  const budgets = (expired!.w_level as string[]).map(
    (l, i) => `${l}/${(expired!.w_budget as string[])[i]}`,
  );
  expect(budgets.filter((_, i) => removed[i] === 1).sort()).toEqual([
    'acme/day-tokens',
    'acme/day-usd',
    'team-a/day-tokens',
    'team-a/key:k1/day-tokens',
    'team-a/user:u1/day-tokens',
  ]);
  // Added back within their windows: they hold what the closes billed them.
  expect(await applied(true)).toBe(true);

  const { report, row } = await audited(client, ch, iso.database);
  expect(report.rows.filter((row) => row.drift !== 0)).toEqual([]);
  for (const level of ['team-a', 'acme', 'team-a/key:k1', 'team-a/user:u1']) {
    expect(row(level, 'day-tokens')).toMatchObject({ authority: 377 + 450, drift: 0 });
  }
  expect(report.maxDrift).toEqual({ tokens: 0, usd: 0 });
});

test('drift audit per window: a close of a removed team counts on the windows its admission listed when it lists none (events from before closes listed them), and once when it lists them', async ({
  audited: { agg },
  ch,
  iso,
  nc,
}) => {
  void agg; // writes the events to ClickHouse
  const month = (tenant: string, used: number, more: Partial<WindowState> = {}): WindowState => ({
    ...window(tenant, used, 0),
    ...more,
  });
  const at = Date.now() - 5_000;
  /** team `tenant` of acme (gone from the config when it closes); its close lists `listed`. */
  const call = (tenant: string, billed: number, listed: WindowState[]) => {
    const [created, settled] = settledCall({ tenant, org: 'acme', atMs: at, keyId: null });
    return [
      HoldfastEvent.parse({ ...created, windows: [month(tenant, 0), month('acme', 0)] }),
      HoldfastEvent.parse({
        ...settled,
        billedTokens: billed,
        chargedTokens: billed,
        windows: listed,
      }),
    ];
  };
  const removed = { limit: 0, enforce: false, removed: true as const };
  await publishEvents(nc, iso.names, [
    // Before: the close listed no windows.
    ...call('gone-old', 300, []),
    // Now: it lists the windows its hold was on, as removed.
    ...call('gone-new', 200, [month('gone-new', 200, removed), month('acme', 500, removed)]),
  ]);
  const sums = async () =>
    Object.fromEntries(
      (await windowSums(ch, iso.database, Date.now())).map((w) => [
        `${w.org}/${w.level}/${w.budget}`,
        w.since.month,
      ]),
    );
  await waitFor(
    async () => {
      const got = await sums();
      return got['acme/gone-new/month-tokens'] === 200 && got['acme/gone-old/month-tokens'] === 300;
    },
    { what: 'the events in ClickHouse' },
  );
  expect(await sums()).toMatchObject({
    'acme/acme/month-tokens': 500,
    'acme/gone-old/month-tokens': 300,
    'acme/gone-new/month-tokens': 200,
  });
});
