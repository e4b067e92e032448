import type { HoldfastEvent, UsageReply } from '@holdfast/events';
import type { AuthorityClient } from '@holdfast/runtime';
import type { NatsConnection } from '@nats-io/transport-node';
import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { newId } from './harness.js';

/**
 * Load and books for the fault tests (cluster.int.test.ts, durability.int.test.ts): many
 * calls in flight over many orgs, every admitted call settled or released, and a close the
 * authority failed to acknowledge retried as the edge does, so that after quiescence the
 * ledger must hold exactly what was acknowledged as settled.
 */

const useCases = [{ id: 'uc', maxTokens: 2_000, models: ['m'] }];

/** Orgs, each with two teams: minute and day windows in tokens and USD, and the org's own. */
export function orgsConfig(orgs: string[]) {
  return {
    // A capacity no run reaches: every admission also takes it, a step of its own in the
    // upstream's slot (`{cap:u}`) beside the org's.
    upstreams: [
      { id: 'u', baseUrl: 'http://127.0.0.1:1/v1', capacity: { tokensPerMinute: 1_000_000_000 } },
    ],
    models: [{ id: 'm', upstream: 'u', price: { inputPerMTok: 0.5, outputPerMTok: 1.5 } }],
    tenants: orgs.flatMap((org) => [
      { id: org, budgets: [{ window: 'day', limit: 150_000, unit: 'tokens' }] },
      {
        id: `${org}-a`,
        parent: org,
        onExpiry: 'release',
        budgets: [
          { window: 'minute', limit: 60_000, unit: 'tokens' },
          { window: 'day', limit: 0.05, unit: 'usd' },
        ],
        useCases,
      },
      {
        id: `${org}-b`,
        parent: org,
        onExpiry: 'release',
        budgets: [{ window: 'month', limit: 90_000, unit: 'tokens' }],
        useCases,
      },
    ]),
  };
}

export const teamsOf = (orgs: string[]): string[] => orgs.flatMap((o) => [`${o}-a`, `${o}-b`]);
const orgOfTeam = (team: string): string => team.slice(0, team.lastIndexOf('-'));

export interface Books {
  admitted: number;
  refused: number;
  /** Tokens acknowledged as settled, by team. */
  settled: Map<string, number>;
  /** Calls the authority answered with an error (fail closed), by org and code. */
  errors: Map<string, number>;
  /** When each org last had an error (ms). */
  lastError: Map<string, number>;
  /** Admissions answered (admitted or refused, not an error), by org, after `since`. */
  answeredAfter: Map<string, number>;
  since: number;
  peak: number;
  /** Every admission the authority acknowledged. */
  admittedIds: Set<string>;
  /** Tokens of each settle acknowledged, by reservation. */
  settledIds: Map<string, number>;
}

export const newBooks = (): Books => ({
  admitted: 0,
  refused: 0,
  settled: new Map(),
  errors: new Map(),
  lastError: new Map(),
  answeredAfter: new Map(),
  since: Number.POSITIVE_INFINITY,
  peak: 0,
  admittedIds: new Set(),
  settledIds: new Map(),
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** How long the load retries a close the authority did not acknowledge. */
const CLOSE_RETRY_MS = 60_000;
const rnd = (lo: number, hi: number) => lo + Math.floor(Math.random() * (hi - lo + 1));

/** `workers` loops of `calls` calls each over random teams, until done or `stop()` is true. */
export async function runLoad(
  client: AuthorityClient,
  teams: string[],
  books: Books,
  o: { workers: number; calls: number; stop?: () => boolean },
): Promise<void> {
  let inFlight = 0;
  const fail = (org: string, code: string) => {
    const k = `${org} ${code}`;
    books.errors.set(k, (books.errors.get(k) ?? 0) + 1);
    books.lastError.set(org, Date.now());
  };
  const close = async (team: string, op: () => ReturnType<AuthorityClient['settle']>) => {
    // An unacknowledged close is retried until it is (the edge's closes stream does this), for
    // CLOSE_RETRY_MS: an org whose master failed over on a loaded box failed closed for over
    // the 101 attempts (about 15 s) this once allowed.
    const from = Date.now();
    for (;;) {
      const r = await op();
      if (r.ok) return r.value;
      fail(orgOfTeam(team), r.error.code);
      if (Date.now() - from > CLOSE_RETRY_MS) {
        throw new Error(`close of ${team} not acknowledged in ${CLOSE_RETRY_MS} ms`);
      }
      await sleep(100);
    }
  };
  const worker = async () => {
    for (let i = 0; i < o.calls && !o.stop?.(); i++) {
      const team = teams[rnd(0, teams.length - 1)]!;
      const org = orgOfTeam(team);
      const reservationId = newId();
      const promptTokens = rnd(50, 1_500);
      inFlight++;
      books.peak = Math.max(books.peak, inFlight);
      const r = await client.admit({
        reservationId,
        tenant: team,
        keyId: null,
        useCase: 'uc',
        model: 'm',
        promptTokens,
        maxTokens: rnd(1, 2_000),
        // Longer than the outages the fault tests make: a hold whose close is being retried
        // is not expired meanwhile (a real lease is 30 minutes).
        leaseMs: 15_000,
      });
      inFlight--;
      if (!r.ok) {
        fail(org, r.error.code);
        await sleep(20);
        continue;
      }
      if (Date.now() > books.since) {
        books.answeredAfter.set(org, (books.answeredAfter.get(org) ?? 0) + 1);
      }
      if (!r.value.admitted) {
        books.refused++;
        continue;
      }
      books.admitted++;
      books.admittedIds.add(reservationId);
      await sleep(rnd(0, 20));
      if (Math.random() < 0.75) {
        const completionTokens = rnd(0, r.value.maxTokens);
        const s = await close(team, () =>
          client.settle({ reservationId, tenant: team, usage: { promptTokens, completionTokens } }),
        );
        // A retry may find the first attempt applied: already_settled. Anything else means
        // an acknowledged admission was lost.
        expect(['settled', 'already_settled'], reservationId).toContain(s.status);
        if (s.status === 'settled') expect(s.billedTokens).toBe(promptTokens + completionTokens);
        books.settled.set(team, (books.settled.get(team) ?? 0) + promptTokens + completionTokens);
        books.settledIds.set(reservationId, promptTokens + completionTokens);
      } else {
        const s = await close(team, () =>
          client.release({ reservationId, tenant: team, reason: 'upstream_error' }),
        );
        expect(['released', 'already_released'], reservationId).toContain(s.status);
      }
    }
  };
  await Promise.all(Array.from({ length: o.workers }, worker));
}

/**
 * No window over its limit in any event, none over it or holding anything at the end, and
 * the ledger (each team's lifetime billed tokens) is exactly what was acknowledged as settled.
 */
export function checkBooks(
  final: UsageReply,
  events: HoldfastEvent[],
  teams: string[],
  books: Books,
) {
  let checked = 0;
  for (const e of events) {
    if (!('windows' in e)) continue;
    for (const w of e.windows) {
      expect(w.used + w.held, `${e.type} ${w.tenant}/${w.budget}`).toBeLessThanOrEqual(w.limit);
      checked++;
    }
  }
  expect(checked).toBeGreaterThan(1_000);
  for (const team of teams) {
    const t = final.tenants.find((x) => x.tenant === team);
    expect(t, team).toBeDefined();
    expect(t!.inFlight, team).toBe(0);
    for (const w of t!.windows) {
      expect(w.held, `${team} ${w.budget}`).toBe(0);
      expect(w.used, `${team} ${w.budget}`).toBeLessThanOrEqual(w.limit);
    }
    expect(t!.billedTokens, `${team} ledger = acknowledged settles`).toBe(
      books.settled.get(team) ?? 0,
    );
  }
  // Every acknowledged admission has its event, and what the events charged each team is the
  // ledger too (the outbox lost nothing).
  const created = new Set(
    events.filter((e) => e.type === 'reservation.created').map((e) => e.reservationId),
  );
  for (const id of books.admittedIds) expect(created.has(id), `created event of ${id}`).toBe(true);
  const charged = new Map<string, number>();
  for (const e of events) {
    if (e.type !== 'reservation.settled') continue;
    charged.set(e.tenant, (charged.get(e.tenant) ?? 0) + e.chargedTokens);
  }
  const closes = new Map<string, HoldfastEvent[]>();
  for (const e of events) {
    if (e.type.startsWith('reservation.') && 'reservationId' in e) {
      closes.set(e.reservationId, [...(closes.get(e.reservationId) ?? []), e]);
    }
  }
  const missing = [...books.settledIds].filter(
    ([id]) => !closes.get(id)?.some((e) => e.type === 'reservation.settled'),
  );
  expect(
    missing.map(([id, tokens]) => ({ id, tokens, events: closes.get(id) })),
    'acknowledged settles without their event',
  ).toEqual([]);
  for (const team of teams) {
    expect(charged.get(team) ?? 0, `${team} events`).toBe(books.settled.get(team) ?? 0);
  }
}

/** 256 workers of calls that go on until `end()`; resolves once the load is under way. */
export async function startLoad(client: AuthorityClient, teams: string[]) {
  const books = newBooks();
  let stop = false;
  const load = runLoad(client, teams, books, { workers: 256, calls: 1_000, stop: () => stop });
  await waitFor(() => books.admitted > 300, { timeoutMs: 20_000, what: 'load under way' });
  return {
    books,
    end: async () => {
      stop = true;
      await load;
    },
  };
}

/**
 * Stalls of the box as this process sees them: each NATS round trip (`flush`) plus the timer
 * before it that took `stallMs` longer than it should, as [from, to] in ms. A loaded 2-core box
 * stalls every process at once: a figure that tells a failure of the box's from the code's.
 */
export function watchStalls(nc: NatsConnection, stallMs = 250, everyMs = 50) {
  const stalls: [number, number][] = [];
  let on = true;
  const loop = async () => {
    let from = Date.now();
    while (on) {
      await sleep(everyMs);
      // A connection closed under it (the test failed first) ends the watch.
      await nc.flush().catch(() => (on = false));
      const to = Date.now();
      if (to - from - everyMs >= stallMs) stalls.push([from, to]);
      from = to;
    }
  };
  const done = loop();
  return {
    stalls,
    /** Milliseconds stalled in all. */
    total: () => stalls.reduce((n, [from, to]) => n + to - from, 0),
    stop: async () => {
      on = false;
      await done;
    },
  };
}
