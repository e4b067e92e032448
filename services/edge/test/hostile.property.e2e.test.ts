import { sha256Hex } from '../src/index.js';
import { expect } from 'vitest';
import { expectLimitHeld } from './books.js';
import { hostileText as text, pick, prng, type Rand } from './fuzz.js';
import {
  edgeTest as test,
  nothingHeldAnywhere,
  type Stack,
  type TestConfig,
  UNREAD_AT_HANGUP,
} from './harness.js';

/**
 * Issue 11's property: whatever mix of hostile requests 16 workers send (any script, vendor
 * length fields, images, several choices, clients that leave at random points) while an admin
 * moves a team between orgs and suspends another, reserve budgets hold: what the model billed,
 * read from the mock upstream's own log, never exceeds a limit, the books agree with it to the
 * token, and once the run is quiet nothing is held anywhere.
 */

const TEAMS = ['t1', 't2', 't3', 't4'] as const;
const LIMITS = { t1: 12_000, t2: 12_000, t3: 10_000, t4: 10_000, 'org-a': 20_000 } as const;
const MODELS = ['gpt-4o-mini', 'mystery-model', 'llama-3-8b-instruct'];

/** org-a (20,000) holds t1 and t2 (12,000 each); t3 moves under org-b and back; t4 is suspended. */
function hierarchy(c: TestConfig, t3Parent: string | undefined): void {
  c.models.push(
    {
      id: 'mystery-model',
      upstream: 'default',
      tokenizer: 'estimate',
      price: { inputPerMTok: 1, outputPerMTok: 2 },
    },
    {
      id: 'llama-3-8b-instruct',
      upstream: 'default',
      tokenizer: 'upstream',
      price: { inputPerMTok: 0.1, outputPerMTok: 0.1 },
    },
  );
  const team = (id: (typeof TEAMS)[number], parent?: string) => ({
    id,
    ...(parent ? { parent } : {}),
    mode: 'reserve',
    maxInFlight: 64,
    budgets: [{ window: 'month', limit: LIMITS[id], unit: 'tokens' }],
    useCases: [{ id: 'uc', maxTokens: 512, models: MODELS }],
    keys: [{ id: `${id}-key`, sha256: sha256Hex(`sk-${id}`) }],
  });
  // The property is about budgets, not timeouts: on a loaded 2-core box one attempt of the
  // upstream-counted model has taken over the harness's 5 s (a 504 the property cannot judge).
  for (const u of c.upstreams) u.timeoutMs = 30_000;
  c.tenants = [
    { id: 'org-a', budgets: [{ window: 'month', limit: LIMITS['org-a'], unit: 'tokens' }] },
    { id: 'org-b', budgets: [] },
    team('t1', 'org-a'),
    team('t2', 'org-a'),
    team('t3', t3Parent),
    team('t4'),
  ];
}

function request(r: Rand, team: string): Record<string, unknown> {
  const model = pick(r, MODELS);
  const content: unknown =
    model === 'gpt-4o-mini' && r() < 0.2
      ? [
          { type: 'text', text: text(r) },
          { type: 'image_url', image_url: { url: 'https://example.test/a.png', detail: 'low' } },
        ]
      : text(r);
  const body: Record<string, unknown> = {
    model,
    user: team,
    messages: [{ role: 'user', content }],
    max_tokens: 1 + Math.floor(r() * 600),
    n: r() < 0.2 ? 2 + Math.floor(r() * 2) : 1,
    stream: r() < 0.5,
  };
  if (r() < 0.3) body.n_predict = 1_500;
  if (r() < 0.2) body.max_new_tokens = 1_500;
  if (r() < 0.2) body.best_of = 5;
  if (r() < 0.1) body.options = { num_predict: 1_500 };
  return body;
}

/** Longer than any call may take (the upstream's timeout is 30 s): a call past it is stuck. */
const STUCK_MS = 60_000;

async function call(s: Stack, r: Rand, team: string): Promise<void> {
  const leave = r() < 0.2 ? AbortSignal.timeout(Math.floor(r() * 300)) : undefined;
  const stuck = AbortSignal.timeout(STUCK_MS);
  const body = request(r, team);
  let status: number | undefined;
  let received = '';
  try {
    const res = await fetch(`${s.edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer sk-${team}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: leave ? AbortSignal.any([leave, stuck]) : stuck,
    });
    status = res.status;
    const decoder = new TextDecoder();
    const reader = res.body?.getReader();
    for (let part = await reader?.read(); part && !part.done; part = await reader?.read()) {
      received += decoder.decode(part.value, { stream: true });
    }
    // A 400 only for more choices than max_tokens (each gets max_tokens / n; docs/api.md).
    const fewerTokensThanChoices =
      res.status === 400 &&
      (body.n as number) > (body.max_tokens as number) &&
      received.includes('choices need at least one token each');
    if (![200, 403, 429].includes(res.status) && !fewerTokensThanChoices) {
      throw new Error(`unexpected ${res.status}: ${received.slice(0, 300)}`);
    }
  } catch (err) {
    if (stuck.aborted) {
      // Say which call never ended, and how far it got, instead of timing the test out.
      const { messages: _m, ...fields } = body;
      throw new Error(
        `a call of ${team} did not end within ${STUCK_MS} ms: ${JSON.stringify(fields)}, status ${status ?? 'none'}, ${received.length} characters received, last: ${JSON.stringify(received.slice(-300))}`,
        { cause: err },
      );
    }
    if (!leave?.aborted) throw err;
  }
}

// More seeds: HOSTILE_SEEDS=1,2,3 (each about 15 s).
for (const seed of (process.env.HOSTILE_SEEDS ?? '11,23,37,41').split(',').map(Number)) {
  test(`seed ${seed}: 16 workers of hostile calls, admin changes mid-run: no limit exceeded, books agree, nothing held`, async ({
    stack,
    redis,
    iso,
  }) => {
    const r = prng(seed);
    let t3Parent: string | undefined;
    let ignoreMaxTokens: number | null = null;
    const s = await stack({
      patch: (c) => hierarchy(c, t3Parent),
      behaviour: {
        completion: { mode: 'uniform', min: 0, max: 800 },
        // 2-3 ms a token: faster than any provider streams. (A mock that writes a whole reply
        // at once fills socket buffers the edge never reads once it aborts: it bills tokens
        // nobody received, a case docs/budgets.md describes.)
        tokenDelayMs: 2 + Math.floor(r() * 2),
        ignoreMaxTokens: (ignoreMaxTokens = r() < 0.3 ? 700 : null),
        seed,
      },
    });
    const workers = Array.from({ length: 16 }, async (_, w) => {
      const wr = prng(seed * 100 + w);
      for (let i = 0; i < 14; i++) await call(s, wr, TEAMS[(w + i) % TEAMS.length]!);
    });
    const admin = (async () => {
      await new Promise((d) => setTimeout(d, 150));
      t3Parent = 'org-b';
      await s.applyConfig();
      await s.client.suspend({ tenant: 't4', reason: 'property test', by: 'admin' });
      await new Promise((d) => setTimeout(d, 300));
      t3Parent = undefined;
      await s.applyConfig();
      await s.client.resume({ tenant: 't4', by: 'admin' });
    })();
    await Promise.all([...workers, admin]);

    // Quiet: nothing in flight or held in any window, every lease index empty.
    for (const t of TEAMS) await s.settled(t);
    await nothingHeldAnywhere(redis, iso.keyPrefix);

    const calls = s.upstream.stats().recent;
    const billedBy = (team: string) =>
      calls
        .filter((c) => c.endUser === team)
        .reduce((n, c) => n + c.promptTokens + c.completionTokens, 0);
    expect(calls.length).toBeGreaterThan(20);
    const events = await s.events();
    const settled = new Map(
      events.flatMap((e) =>
        e.type === 'reservation.settled' ? [[e.reservationId, e] as const] : [],
      ),
    );
    // What Holdfast billed each team; what it billed past a hold, recorded as an overrun (a
    // call cut at its output limit is billed what its client got, the event that crossed the
    // limit included: docs/api.md; never with an upstream that keeps to max_tokens); and what
    // the model billed past Holdfast: the tokens written into a connection the edge had hung
    // up on (a cut call; docs/budgets.md, "What Holdfast cannot see": at most
    // UNREAD_AT_HANGUP a call, checked below).
    const overruns = events.flatMap((e) => (e.type === 'reservation.overrun' ? [e] : []));
    if (ignoreMaxTokens === null) expect(overruns).toEqual([]);
    for (const o of overruns) {
      const cutCall = calls.find((c) => c.clientRequestId === o.reservationId);
      expect(cutCall?.outcome, `the call of overrun ${o.reservationId}`).toBe('aborted');
      // By the event that crossed the limit, a few tokens; a model counted by the proven
      // bound bills its output by it, more than the hold (docs/api.md), never less.
      if (o.model !== 'mystery-model') {
        expect(o.overrunTokens, `overrun ${o.reservationId}`).toBeLessThanOrEqual(UNREAD_AT_HANGUP);
      }
    }
    const overrun = (team: string) =>
      overruns.filter((e) => e.tenant === team).reduce((n, e) => n + e.overrunTokens, 0);
    const booked = (team: string) =>
      [...settled.values()]
        .filter((e) => e.tenant === team)
        .reduce((n, e) => n + e.billedTokens, 0);
    const unread = (team: string) =>
      calls
        .filter((c) => c.endUser === team)
        .reduce((n, c) => {
          const e = settled.get(c.clientRequestId ?? '');
          return n + (e ? Math.max(0, c.promptTokens + c.completionTokens - e.billedTokens) : 0);
        }, 0);
    const bills = { holdfast: booked, provider: billedBy, unread, overrun };
    // Teams that stayed in place: within their own limit, and org-a's teams within org-a's.
    for (const t of ['t1', 't2', 't4'] as const) expectLimitHeld([t], LIMITS[t], bills);
    expectLimitHeld(['t1', 't2'], LIMITS['org-a'], bills);
    // t3 moved to another org and back: each org's windows held it to its limit.
    expectLimitHeld(['t3'], 2 * LIMITS.t3, bills);
    // The books, call by call (the edge sends its reservation id as x-client-request-id):
    // - a call that ran to its end is billed what the model billed, to the token (a model
    //   counted without its own tokenizer: the provider's usage decides);
    // - a call the edge ended early (its client left, the upstream wrote past max_tokens, its
    //   tenant was suspended) is billed what the edge received: for a model with its own
    //   tokenizer (or the upstream's count) that is what it billed less the tokens still in
    //   flight when the edge hung up, for the others the proven upper bound.
    let cut = 0;
    for (const c of calls) {
      if (c.completionTokens === 0 && c.promptTokens === 0) continue; // refused by the mock
      const e = settled.get(c.clientRequestId ?? '');
      // Unsettled: say what the stream holds of it (a release, an expiry, nothing) and the call.
      const of = () =>
        events.flatMap((x) =>
          'reservationId' in x && x.reservationId === c.clientRequestId ? [x.type] : [],
        );
      expect(
        e,
        `settlement of ${c.clientRequestId}: ${JSON.stringify({ events: of(), call: c })}`,
      ).toBeDefined();
      const truth = c.promptTokens + c.completionTokens;
      if (e!.outcome === 'completed' && c.outcome === 'completed') {
        expect(e!.billedTokens, c.model).toBe(truth);
      } else if (c.model !== 'mystery-model') {
        cut++;
        expect(truth - e!.billedTokens, c.model).toBeLessThanOrEqual(UNREAD_AT_HANGUP);
      } else {
        cut++;
        expect(e!.billedTokens + UNREAD_AT_HANGUP, c.model).toBeGreaterThanOrEqual(truth);
      }
    }
    expect(cut).toBeGreaterThan(0);
    // ~6 s on a quiet box; a loaded one streams the 224 calls several times slower.
  }, 300_000);
}
