import { randomUUID } from 'node:crypto';
import type { AuthorityClient } from '@holdfast/runtime';
import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { auditTest as test, CONFIG } from '../test/audit-stack.js';
import { runAudit, type AuditReport } from './audit.js';
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

async function admit(client: AuthorityClient, promptTokens: number, leaseMs?: number) {
  const reservationId = randomUUID();
  const r = await client.admit({
    reservationId,
    tenant: 'team-a',
    keyId: KEY.id,
    endUser: 'u1',
    useCase: 'uc',
    model: 'gpt-4o-mini',
    promptTokens,
    maxTokens: 200,
    ...(leaseMs ? { leaseMs } : {}),
  });
  if (!r.ok || !r.value.admitted) throw new Error(`not admitted: ${JSON.stringify(r)}`);
  return reservationId;
}

async function settle(client: AuthorityClient, reservationId: string, prompt: number, out: number) {
  const s = await client.settle({
    reservationId,
    tenant: 'team-a',
    usage: { promptTokens: prompt, completionTokens: out },
  });
  if (!s.ok) throw new Error(s.error.message);
}

test('drift audit per window: budgets added mid-window and while calls are held (one settled, one expired) show no drift, key and end-user windows included', async ({
  audited: { client },
  ch,
  iso,
}) => {
  expect((await client.configApply({ document: config(false), source: 'test' })).ok).toBe(true);
  // Billed before the new budgets exist: in the tenants' lifetime, in none of the new windows.
  await settle(client, await admit(client, 400), 400, 150);
  // Held while the budgets are added: X settles (the new windows are billed its whole usage,
  // its event's own charge is what passed the hold), Y's lease runs out (reserve bills the
  // old windows its worst case, the new ones nothing).
  const x = await admit(client, 300);
  const y = await admit(client, 250, 1_000);
  const applied = await client.configApply({ document: config(true), source: 'test: add' });
  expect(applied.ok).toBe(true);
  await settle(client, x, 300, 90);
  await waitFor(
    async () => {
      const u = await client.usage({ tenant: 'team-a' });
      return u.ok && u.value.tenants[0]?.inFlight === 0;
    },
    { timeoutMs: 15_000, what: 'the hold of Y expired' },
  );
  // After: a call billed into every window, the key's and the end user's.
  await settle(client, await admit(client, 120), 120, 30);

  let report: AuditReport | undefined;
  await waitFor(
    async () => {
      const r = await runAudit({ ch, database: iso.database, authority: client });
      report = r.ok ? r.value : undefined;
      return report?.rows.every((row) => row.drift === 0);
    },
    { timeoutMs: 30_000, what: 'zero drift per window' },
  ).catch(() => undefined);
  if (!report) throw new Error('no report');
  expect(report.rows.filter((r) => r.drift !== 0)).toEqual([]);
  const row = (tenant: string, counter: string) =>
    report?.rows.find((r) => r.tenant === tenant && r.counter === counter);
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
  // Y did expire (billed its worst case to the windows it was held on, nothing to the new ones).
  const expired = await ch.query<Record<string, unknown>>(
    sql`SELECT w_level, w_budget, w_charged FROM ${qualified(iso.database, 'events_raw_v1')} FINAL WHERE reservation_id = ${y} AND type = 'reservation.expired'`,
  );
  expect(expired).toHaveLength(1);
  const charged = (r: Record<string, unknown>) =>
    Object.fromEntries(
      (r.w_level as string[]).map((l, i) => [
        `${l}/${(r.w_budget as string[])[i]}`,
        Number((r.w_charged as unknown[])[i]),
      ]),
    );
  expect(charged(expired[0]!)).toMatchObject({
    'team-a/minute-tokens': 250 + 200,
    'acme/month-tokens': 250 + 200,
    'team-a/day-tokens': 0,
    'acme/day-tokens': 0,
    'acme/day-usd': 0,
    'team-a/key:k1/day-tokens': 0,
    'team-a/user:u1/day-tokens': 0,
  });
});
