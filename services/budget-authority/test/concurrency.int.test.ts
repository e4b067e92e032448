import type { HoldfastEvent } from '@holdfast/events';
import { AuthorityClient } from '@holdfast/runtime';
import { infraTest as test, waitFor } from '@holdfast/testkit';
import { describe, expect } from 'vitest';
import { startTestAuthority } from '../src/testing.js';
import { newId, quiescent, readEvents } from './harness.js';

/**
 * The invariant that matters (docs/budgets.md): in reserve mode, for every window, billed usage
 * never exceeds the limit, whatever the concurrency and the number of authority replicas.
 * Randomized: 3 replicas in one queue group, 320 workers (so 256+ admissions in flight),
 * tenants with minute/day/month windows in tokens and in USD, an org above one team, and
 * every call randomly settled, released or abandoned (its lease then expires).
 */

const WORKERS = 320;
const CALLS_PER_WORKER = 8;
const LEASE_MS = 3_000;

const budgets = (scale: number) => [
  { window: 'minute', limit: 150_000 * scale, unit: 'tokens' },
  { window: 'day', limit: 400_000 * scale, unit: 'tokens' },
  { window: 'month', limit: 600_000 * scale, unit: 'tokens' },
  { window: 'minute', limit: 0.15 * scale, unit: 'usd' },
  { window: 'day', limit: 0.3 * scale, unit: 'usd' },
  { window: 'month', limit: 0.4 * scale, unit: 'usd' },
];
const useCases = [{ id: 'uc', maxTokens: 2_000, models: ['m'] }];

const CONFIG = {
  upstreams: [{ id: 'u', baseUrl: 'http://127.0.0.1:1/v1' }],
  models: [{ id: 'm', upstream: 'u', price: { inputPerMTok: 0.5, outputPerMTok: 1.5 } }],
  tenants: [
    { id: 'reserve-a', budgets: budgets(1), useCases, maxInFlight: 200 },
    { id: 'reserve-b', parent: 'org', budgets: budgets(2), useCases },
    { id: 'org', budgets: [{ window: 'day', limit: 300_000, unit: 'tokens' }] },
    { id: 'post-a', mode: 'post', budgets: budgets(1), useCases },
  ],
};

interface Tally {
  admitted: number;
  refused: number;
  settled: number;
  released: number;
  abandoned: number;
}

async function runLoad(
  client: AuthorityClient,
  tenants: string[],
  tally: Record<string, Tally>,
  inFlight: { now: number; peak: number },
) {
  const rnd = (lo: number, hi: number) => lo + Math.floor(Math.random() * (hi - lo + 1));
  const worker = async () => {
    for (let i = 0; i < CALLS_PER_WORKER; i++) {
      const tenant = tenants[rnd(0, tenants.length - 1)]!;
      const t = tally[tenant]!;
      const reservationId = newId();
      const promptTokens = rnd(50, 1_500);
      inFlight.now++;
      inFlight.peak = Math.max(inFlight.peak, inFlight.now);
      const r = await client.admit({
        reservationId,
        tenant,
        keyId: null,
        useCase: 'uc',
        model: 'm',
        promptTokens,
        maxTokens: rnd(1, 2_000),
        leaseMs: LEASE_MS,
      });
      inFlight.now--;
      if (!r.ok) throw new Error(`admit failed: ${r.error.code}`);
      if (!r.value.admitted) {
        t.refused++;
        continue;
      }
      t.admitted++;
      const max = r.value.maxTokens;
      await new Promise((res) => setTimeout(res, rnd(0, 20)));
      const fate = Math.random();
      if (fate < 0.7) {
        const s = await client.settle({
          reservationId,
          tenant,
          usage: { promptTokens, completionTokens: rnd(0, max) },
        });
        if (!s.ok || s.value.status !== 'settled') throw new Error(`settle: ${JSON.stringify(s)}`);
        t.settled++;
      } else if (fate < 0.9) {
        const s = await client.release({ reservationId, tenant, reason: 'upstream_error' });
        if (!s.ok || s.value.status !== 'released')
          throw new Error(`release: ${JSON.stringify(s)}`);
        t.released++;
      } else {
        t.abandoned++;
      }
    }
  };
  await Promise.all(Array.from({ length: WORKERS }, worker));
}

/** Events of a tenant and type; a summarised refusal stands for `count` refusals. */
function count(events: HoldfastEvent[], tenant: string, type: HoldfastEvent['type']) {
  return events
    .filter(
      (e) =>
        e.tenant === tenant && e.type === type && !(e.type === 'admission.refused' && e.shadow),
    )
    .reduce((n, e) => n + (e.type === 'admission.refused' ? e.count : 1), 0);
}

describe('concurrency', () => {
  test('reserve never bills past a limit; post overshoots; every hold ends; every change has one event', async ({
    natsUrl,
    redisUrl,
    redis,
    nc,
    iso,
  }) => {
    const reps = await Promise.all(
      [0, 1, 2].map(() =>
        startTestAuthority({
          natsUrl,
          redisUrl,
          nc,
          names: iso.names,
          keyPrefix: iso.keyPrefix,
          clock: false,
          sweepIntervalMs: 200,
        }),
      ),
    );
    const client = new AuthorityClient({ nc, names: iso.names, timeoutMs: 10_000 });
    try {
      const applied = await client.configApply({ document: CONFIG });
      expect(applied.ok).toBe(true);
      await waitFor(() => reps.every((r) => r.authority.ctx.config.version >= 1), {
        what: 'every replica on the config',
      });

      const tenants = ['reserve-a', 'reserve-b', 'post-a'];
      const tally: Record<string, Tally> = Object.fromEntries(
        tenants.map((t) => [t, { admitted: 0, refused: 0, settled: 0, released: 0, abandoned: 0 }]),
      );
      const inFlight = { now: 0, peak: 0 };
      await runLoad(client, tenants, tally, inFlight);
      expect(inFlight.peak).toBeGreaterThanOrEqual(256);

      // Abandoned holds expire after their lease; then nothing is held anywhere.
      const final = await quiescent(client, redis, iso.keyPrefix);
      const events = await readEvents(nc, iso.names);

      for (const tenant of tenants) {
        const t = tally[tenant]!;
        // One event per state change, no more, no less.
        expect(count(events, tenant, 'reservation.created'), `${tenant} created`).toBe(t.admitted);
        expect(count(events, tenant, 'admission.refused'), `${tenant} refused`).toBe(t.refused);
        expect(count(events, tenant, 'reservation.settled'), `${tenant} settled`).toBe(t.settled);
        expect(count(events, tenant, 'reservation.released'), `${tenant} released`).toBe(
          t.released,
        );
        expect(count(events, tenant, 'reservation.expired'), `${tenant} expired`).toBe(t.abandoned);
        // The load really hit the limits: some calls were refused.
        expect(t.refused, `${tenant} refused`).toBeGreaterThan(0);
      }
      // Every reservation closed exactly once.
      const closes = new Map<string, number>();
      for (const e of events) {
        if (
          e.type === 'reservation.settled' ||
          e.type === 'reservation.released' ||
          e.type === 'reservation.expired'
        ) {
          closes.set(e.reservationId, (closes.get(e.reservationId) ?? 0) + 1);
        }
      }
      expect([...closes.values()].every((n) => n === 1)).toBe(true);
      expect(closes.size).toBe(events.filter((e) => e.type === 'reservation.created').length);
      // Event ids are unique.
      expect(new Set(events.map((e) => e.id)).size).toBe(events.length);

      // The invariant, after every single state change and at the end: reserve-mode windows
      // never hold more than their limit, billed or held.
      let checked = 0;
      for (const e of events) {
        if (!('windows' in e) || !e.tenant.startsWith('reserve')) continue;
        for (const w of e.windows) {
          expect(w.used, `${e.type} ${w.tenant}/${w.budget}`).toBeLessThanOrEqual(w.limit);
          expect(w.used + w.held, `${e.type} ${w.tenant}/${w.budget}`).toBeLessThanOrEqual(w.limit);
          checked++;
        }
      }
      // Refusals past 20 a second per tenant are summarised, so most states come from holds.
      expect(checked).toBeGreaterThan(4_000);
      for (const t of final.tenants.filter(
        (x) => x.tenant.startsWith('reserve') || x.tenant === 'org',
      )) {
        for (const w of t.windows)
          expect(w.used, `${t.tenant}/${w.budget}`).toBeLessThanOrEqual(w.limit);
      }
      // Check-then-bill, same harness: it goes over. This is what the test would catch.
      const post = final.tenants.find((t) => t.tenant === 'post-a')!;
      const over = post.windows.filter((w) => w.used > w.limit);
      expect(over.length).toBeGreaterThan(0);
      console.log(
        `peak in flight ${inFlight.peak}; ` +
          tenants.map((t) => `${t}: ${JSON.stringify(tally[t])}`).join('; ') +
          `; post-a overshoot: ${over.map((w) => `${w.budget} ${((w.used / w.limit - 1) * 100).toFixed(1)}%`).join(', ')}`,
      );
    } finally {
      await Promise.all(reps.map((r) => r.stop()));
    }
  });
});
