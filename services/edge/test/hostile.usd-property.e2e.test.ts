import { qualified, sql } from '@holdfast/billing-aggregator';
import { modelPrices, type ModelPrices, type PriceConfig } from '@holdfast/config';
import type { HoldfastEvent } from '@holdfast/events';
import type { RequestRecord } from '@holdfast/mock-upstream';
import { waitFor } from '@holdfast/testkit';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'vitest';
import { sha256Hex } from '../src/index.js';
import { expectLimitHeld, providerBooks, withAggregator } from './books.js';
import { HOSTILE_TEXTS as TEXTS, hostileText as text, pick, prng, type Rand } from './fuzz.js';
import {
  edgeTest as test,
  nothingHeldAnywhere,
  type Stack,
  type TestConfig,
  UNREAD_AT_HANGUP,
} from './harness.js';
import { CLAUDE, withClaude } from './surfaces.js';

/**
 * The dollar side of the hostile property: 16 workers send any mix of the three surfaces
 * (Chat Completions, Responses, Messages), any `service_tier` (priced, unpriced, malformed),
 * audio in and out, Anthropic cache writes of either lifetime, any output length, streamed or
 * not, and clients that leave at random points, while an admin suspends and resumes a team.
 * The provider (the mock) bills each call at the tier it served it at and at audio prices for
 * audio. Whatever the mix, no team and no org is billed past its `usd` limit by the
 * provider's own reckoning, every call the provider billed has its settlement (to the
 * micro-dollar when both sides saw its end), the ledger and ClickHouse agree with the events,
 * and once the run is quiet nothing is held.
 */

type TieredPrice = PriceConfig & {
  serviceTiers?: Partial<Record<'priority' | 'flex', PriceConfig>>;
};

const TEAMS = ['u1', 'u2', 'u3'] as const;
type Team = (typeof TEAMS)[number];
/** USD a day: u1 and u2 under org usd-org, u3 alone. */
const LIMITS = { u1: 0.05, u2: 0.05, u3: 0.04, 'usd-org': 0.07 } as const;

/** gpt-5's prices as OpenAI bills them: default, priority about 2x, flex half. */
const GPT5: TieredPrice = {
  inputPerMTok: 1.25,
  outputPerMTok: 10,
  cachedInputPerMTok: 0.125,
  serviceTiers: {
    priority: { inputPerMTok: 2.5, outputPerMTok: 20, cachedInputPerMTok: 0.25 },
    flex: { inputPerMTok: 0.625, outputPerMTok: 5, cachedInputPerMTok: 0.0625 },
  },
};
/** gpt-4o-audio's: text $2.50 / $10, audio $40 / $80 per MTok. */
const AUDIO: TieredPrice = {
  inputPerMTok: 2.5,
  outputPerMTok: 10,
  audioInputPerMTok: 40,
  audioOutputPerMTok: 80,
};
/** Claude Sonnet's, with a Priority Tier price (cache writes at Anthropic's 1.25x and 2x). */
const SONNET: TieredPrice = {
  inputPerMTok: 3,
  outputPerMTok: 15,
  cachedInputPerMTok: 0.3,
  serviceTiers: { priority: { inputPerMTok: 6, outputPerMTok: 30, cachedInputPerMTok: 0.6 } },
};
const PRICES: Record<string, { price: TieredPrice; api: 'openai' | 'anthropic' }> = {
  'gpt-5': { price: GPT5, api: 'openai' },
  'gpt-audio': { price: AUDIO, api: 'openai' },
  [CLAUDE]: { price: SONNET, api: 'anthropic' },
};

/** The provider's prices for one call: its model's, at the tier it served the call at. */
function providerPrices(r: RequestRecord): ModelPrices {
  const m = PRICES[r.model];
  if (!m) throw new Error(`the provider served an unexpected model ${r.model}`);
  const tier =
    r.serviceTier === 'priority' || r.serviceTier === 'flex'
      ? m.price.serviceTiers?.[r.serviceTier]
      : undefined;
  return modelPrices(tier ?? m.price, m.api);
}

function teams(c: TestConfig): void {
  withClaude(c);
  c.models.find((m) => m.id === CLAUDE)!.price = SONNET;
  c.models.push(
    { id: 'gpt-5', upstream: 'default', tokenizer: 'o200k_base', price: GPT5 },
    { id: 'gpt-audio', upstream: 'default', tokenizer: 'o200k_base', price: AUDIO },
  );
  const team = (id: Team, parent?: string) => ({
    id,
    ...(parent ? { parent } : {}),
    mode: 'reserve',
    maxInFlight: 64,
    budgets: [{ window: 'day', limit: LIMITS[id], unit: 'usd' }],
    useCases: [{ id: 'uc', maxTokens: 1_200, models: Object.keys(PRICES) }],
    keys: [{ id: `${id}-key`, sha256: sha256Hex(`sk-${id}`), defaultUseCase: 'uc' }],
  });
  for (const u of c.upstreams) u.timeoutMs = 30_000;
  c.tenants.push(
    { id: 'usd-org', budgets: [{ window: 'day', limit: LIMITS['usd-org'], unit: 'usd' }] },
    team('u1', 'usd-org'),
    team('u2', 'usd-org'),
    team('u3'),
  );
}

/** A tier as a client might send it: none, the priced ones, auto, unpriced, malformed. */
const TIERS: readonly unknown[] = [
  undefined,
  undefined,
  'auto',
  'default',
  'priority',
  'priority',
  'flex',
  'scale',
  7,
];
/** A short WAV's worth of base64 (what the edge counts as text; the mock bills it as audio). */
const WAV = Buffer.alloc(600, 7).toString('base64');

interface Call {
  path: string;
  headers: Record<string, string>;
  body: Record<string, unknown>;
}

function request(r: Rand, team: Team): Call {
  const maxTokens = 1 + Math.floor(r() * 1_500);
  const stream = r() < 0.5;
  const tier = pick(r, TIERS);
  // Anthropic's own values (and a wrong one): the OpenAI names are 400s there.
  const messagesTier = pick(r, [undefined, 'auto', 'standard_only', 'standard_only', 'flex', 7]);
  const withMessagesTier = (b: Record<string, unknown>) =>
    messagesTier === undefined ? b : { ...b, service_tier: messagesTier };
  const withTier = (b: Record<string, unknown>) =>
    tier === undefined ? b : { ...b, service_tier: tier };
  const bearer = { authorization: `Bearer sk-${team}` };
  const surface = r();
  if (surface < 0.25) {
    return {
      path: '/v1/responses',
      headers: bearer,
      body: withTier({
        model: 'gpt-5',
        input: text(r),
        max_output_tokens: maxTokens,
        stream,
        ...(r() < 0.5 ? { reasoning: { effort: pick(r, ['low', 'medium', 'high']) } } : {}),
      }),
    };
  }
  if (surface < 0.5) {
    const cache =
      r() < 0.6 ? { cache_control: { type: 'ephemeral', ttl: pick(r, ['5m', '1h']) } } : {};
    return {
      path: '/v1/messages',
      headers: { 'x-api-key': `sk-${team}`, 'anthropic-version': '2023-06-01' },
      body: withMessagesTier({
        model: CLAUDE,
        // Held at $30 / MTok (auto on a model priced at priority): shorter, or none would fit;
        // thinking needs more than its smallest budget.
        ...(r() < 0.2
          ? { max_tokens: 1_100, thinking: { type: 'enabled', budget_tokens: 1_024 } }
          : { max_tokens: 1 + (maxTokens % 400) }),
        stream,
        system: [{ type: 'text', text: TEXTS[0]!.repeat(8), ...cache }],
        messages: [{ role: 'user', content: text(r) }],
      }),
    };
  }
  if (surface < 0.7) {
    const parts: unknown[] = [{ type: 'text', text: text(r) }];
    if (r() < 0.5) parts.push({ type: 'input_audio', input_audio: { data: WAV, format: 'wav' } });
    const audioOut = r() < 0.6;
    return {
      path: '/v1/chat/completions',
      headers: bearer,
      body: withTier({
        model: 'gpt-audio',
        messages: [{ role: 'user', content: parts }],
        max_tokens: maxTokens,
        stream,
        ...(audioOut
          ? { modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'wav' } }
          : {}),
      }),
    };
  }
  return {
    path: '/v1/chat/completions',
    headers: bearer,
    body: withTier({
      model: 'gpt-5',
      messages: [{ role: 'user', content: text(r) }],
      max_completion_tokens: maxTokens,
      n: r() < 0.15 ? 2 : 1,
      ...(r() < 0.5 ? { reasoning_effort: pick(r, ['low', 'medium', 'high']) } : {}),
      stream,
    }),
  };
}

const STUCK_MS = 60_000;

/** One call; its status (undefined when the client left before an answer). */
async function call(s: Stack, r: Rand, team: Team): Promise<number | undefined> {
  const leave = r() < 0.2 ? AbortSignal.timeout(Math.floor(r() * 400)) : undefined;
  const stuck = AbortSignal.timeout(STUCK_MS);
  const c = request(r, team);
  let status: number | undefined;
  let received = '';
  try {
    const res = await fetch(`${s.edge.url}${c.path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...c.headers },
      body: JSON.stringify(c.body),
      signal: leave ? AbortSignal.any([leave, stuck]) : stuck,
    });
    status = res.status;
    const decoder = new TextDecoder();
    const reader = res.body?.getReader();
    for (let part = await reader?.read(); part && !part.done; part = await reader?.read()) {
      received += decoder.decode(part.value, { stream: true });
    }
    // 400: see below; 403: suspended; 429: the budget; 503 and 504: see below.
    if (![200, 400, 403, 429, 503, 504].includes(res.status)) {
      throw new Error(`unexpected ${res.status} on ${c.path}: ${received.slice(0, 300)}`);
    }
    // A 400 is an unpriced or malformed tier, Responses' max_output_tokens under 16, or more
    // choices than max_tokens (each choice gets max_tokens / n; docs/api.md).
    if (res.status === 400) {
      expect(received, c.path).toMatch(
        /service_tier|max_output_tokens|choices need at least one token each/,
      );
    }
    // A 504 is the upstream's whole-call deadline (`timeoutMs`, 30 s here), which the box's
    // speed decides: the mock, the edge and these 16 workers share one event loop, and on a
    // box at load 20-30 a non-streamed gpt-5 reply of 1,036 tokens at most (3 s of token delay)
    // ran 31 s and was cut (seed 29, 2 of 3 runs). The edge hangs up on the provider as when a
    // client leaves, and the call is judged like one below: billed what the edge received.
    if (res.status === 504) expect(received, c.path).toMatch(/upstream_timeout/);
    // A 503 is an admit the authority did not answer within the edge's admit timeout (10 s
    // here), which the box's speed decides too: the authority shares that event loop. The
    // edge never calls the provider then, and releases whatever the authority held for it if
    // the answer comes late: accepted only as that (budget_authority_unavailable), and only
    // with that checked after the run (every call the mock has no record of was closed, nothing held).
    if (res.status === 503) expect(received, c.path).toMatch(/budget_authority_unavailable/);
    return status;
  } catch (err) {
    if (stuck.aborted) {
      const { messages: _m, system: _s, input: _i, ...fields } = c.body;
      throw new Error(
        `a call of ${team} to ${c.path} did not end within ${STUCK_MS} ms: ${JSON.stringify(fields)}, status ${status ?? 'none'}, ${received.length} characters received`,
        { cause: err },
      );
    }
    if (!leave?.aborted) throw err;
    return undefined;
  }
}

/**
 * A call cut short whatever the box's speed: the provider takes it and stalls after a few
 * tokens (an injected hang), and its client leaves once the provider has it. The mix's own
 * leavers are cut only when their timer (0-400 ms) fires after the provider took the call and
 * before it ended: on a starved box the edge may not reach the provider by then (the call is
 * then never billed), and seed 5 once had no call cut at all in CI. Its request is the first of
 * the seed's draws that the edge admits (a drawn tier or length may be a 400, a hold a 429).
 */
async function cutShort(s: Stack, r: Rand, team: Team): Promise<void> {
  s.upstream.failNext({ status: 'hang', afterTokens: Math.floor(r() * UNREAD_AT_HANGUP) });
  const taken = () => s.upstream.stats().errorsInjected.hang > 0;
  const deadline = Date.now() + STUCK_MS;
  for (let draw = 0; draw < 20 && !taken(); draw++) {
    const c = request(r, team);
    const leave = new AbortController();
    let answered = false;
    const answer = fetch(`${s.edge.url}${c.path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...c.headers },
      body: JSON.stringify(c.body),
      signal: leave.signal,
    })
      .then((res) => res.text())
      .catch(() => undefined)
      .finally(() => (answered = true));
    while (!taken() && !answered && Date.now() < deadline) await sleep(5);
    leave.abort();
    await answer;
  }
  expect(taken(), `a call of ${team} the provider took, to cut short`).toBe(true);
}

const micro = (usd: number) => Math.round(usd * 1e6);

/**
 * How each hold the authority made for a call the provider never saw (not in `seen`) ended:
 * `released`, `settled at <micro-USD>`, `expired`, or `open`.
 */
function unservedCloses(events: HoldfastEvent[], seen: ReadonlySet<string>) {
  const ends = new Map<string, string>();
  for (const e of events) {
    if (e.type === 'reservation.released') ends.set(e.reservationId, 'released');
    if (e.type === 'reservation.expired') ends.set(e.reservationId, 'expired');
    if (e.type === 'reservation.settled') ends.set(e.reservationId, `settled at ${e.costMicroUsd}`);
  }
  const out = new Map<string, string>();
  for (const e of events) {
    if (e.type !== 'reservation.created' || seen.has(e.reservationId)) continue;
    out.set(e.reservationId, ends.get(e.reservationId) ?? 'open');
  }
  return out;
}

// More seeds: USD_SEEDS=1,2,3 (8 more passed on 2026-12-02, each about 10 s).
for (const seed of (process.env.USD_SEEDS ?? '5,29').split(',').map(Number)) {
  test(`seed ${seed}: 16 workers across the three surfaces, tiers, audio and cache writes: no usd limit exceeded by the provider's bill, books agree, nothing held`, async ({
    stack,
    redis,
    iso,
    natsUrl,
    clickhouseUrl,
    clickhouse,
  }) => {
    const r = prng(seed);
    const s = await stack({
      patch: teams,
      behaviour: {
        completion: { mode: 'uniform', min: 0, max: 900 },
        tokenDelayMs: 2 + Math.floor(r() * 2),
        reasoningTokens: 128,
        downgradePriority: 0.3,
        priorityTier: true,
        promptCacheMinTokens: 16,
        seed,
      },
    });
    await withAggregator({ natsUrl, clickhouseUrl, clickhouse, iso }, async (ch) => {
      await cutShort(s, prng(seed * 100 + 16), TEAMS[seed % TEAMS.length]!);
      const statuses: Record<string, number> = {};
      const workers = Array.from({ length: 16 }, async (_, w) => {
        const wr = prng(seed * 100 + w);
        for (let i = 0; i < 10; i++) {
          const status = await call(s, wr, TEAMS[(w + i) % TEAMS.length]!);
          statuses[String(status ?? 'left')] = (statuses[String(status ?? 'left')] ?? 0) + 1;
        }
      });
      const admin = (async () => {
        await new Promise((d) => setTimeout(d, 200));
        await s.client.suspend({ tenant: 'u2', reason: 'property test', by: 'admin' });
        await new Promise((d) => setTimeout(d, 400));
        await s.client.resume({ tenant: 'u2', by: 'admin' });
      })();
      await Promise.all([...workers, admin]);

      for (const t of TEAMS) await s.settled(t);
      await nothingHeldAnywhere(redis, iso.keyPrefix);

      const events = await s.events();
      const settled = new Map(
        events.flatMap((e) =>
          e.type === 'reservation.settled' ? [[e.reservationId, e] as const] : [],
        ),
      );
      const records = s.upstream.stats().recent;
      // A call the mock has no record of (a 503's admit answered too late, a client gone
      // before or while the edge sent it) was closed: released, or settled (nothing open,
      // nothing left to expire; nothing is held: above). Settled at a cost is allowed: a client
      // gone while the edge was sending is billed its prompt, as the provider may have read it
      // (the mock records only the requests it read whole; seen in CI: settled at 52 micro-USD).
      const seen = new Set(records.flatMap((c) => c.clientRequestId ?? []));
      const unseen = unservedCloses(events, seen);
      for (const [id, close] of unseen) {
        expect(close, `the close of ${id}, which the mock has no record of`).toMatch(
          /^(released|settled at \d+)$/,
        );
      }
      const billed = records.filter((c) => c.promptTokens + c.completionTokens > 0);
      const teamOf = (c: RequestRecord) => settled.get(c.clientRequestId ?? '')?.tenant;
      const providerUsd = (team: string) =>
        providerBooks(
          billed.filter((c) => teamOf(c) === team),
          providerPrices,
        ).microUsd;
      const spent = Object.fromEntries(TEAMS.map((t) => [t, providerUsd(t)]));
      const tiers = billed.map((c) => `${c.route}:${c.serviceTier}`);
      console.log(
        `[usd-property ${seed}] statuses ${JSON.stringify(statuses)}; ${unseen.size} holds for calls the mock has no record of, all closed; provider $ ${JSON.stringify(spent)}; served ${JSON.stringify(
          Object.fromEntries(
            [...new Set(tiers)].map((t) => [t, tiers.filter((x) => x === t).length]),
          ),
        )}`,
      );
      // Enough calls served to judge (seed 210: 20-25, its budgets soon spent, 46 of 160 a 400).
      expect(billed.length).toBeGreaterThan(15);
      expect(statuses['429'] ?? 0).toBeGreaterThan(0);
      // Every call the provider billed has its settlement: none lost, none unattributed.
      for (const c of billed) expect(teamOf(c), `settlement of ${c.clientRequestId}`).toBeDefined();
      // The invariant: no team and no org past its usd limit in what Holdfast billed, nor in
      // the provider's money but for what it billed past Holdfast on calls cut short (the
      // tokens written into a connection the edge had hung up on: docs/budgets.md, "What
      // Holdfast cannot see"; at most UNREAD_AT_HANGUP a call, checked below).
      const booked = (team: string) =>
        [...settled.values()]
          .filter((e) => e.tenant === team)
          .reduce((n, e) => n + e.costMicroUsd, 0);
      const unread = (team: string) =>
        billed
          .filter((c) => teamOf(c) === team)
          .reduce((n, c) => {
            const past =
              providerBooks([c], providerPrices).microUsd -
              settled.get(c.clientRequestId ?? '')!.costMicroUsd;
            return n + Math.max(0, past);
          }, 0);
      const bills = { holdfast: booked, provider: (t: string) => spent[t]!, unread };
      for (const t of TEAMS) expectLimitHeld([t], micro(LIMITS[t]), bills);
      expectLimitHeld(['u1', 'u2'], micro(LIMITS['usd-org']), bills);
      // Call by call: a call both sides saw end is billed what the provider billed, to the
      // micro-dollar; one cut short (its client left) is billed what the edge received, at
      // most UNREAD_AT_HANGUP output tokens (at the dearest output price) under the provider.
      const slack = UNREAD_AT_HANGUP * 80 + 1;
      let cut = 0;
      for (const c of billed) {
        const e = settled.get(c.clientRequestId!)!;
        const truth = providerBooks([c], providerPrices).microUsd;
        if (e.outcome === 'completed' && c.outcome === 'completed') {
          expect(e.costMicroUsd, `${c.route} ${c.model} ${c.serviceTier}`).toBe(truth);
        } else {
          cut++;
          expect(
            e.costMicroUsd + slack,
            `${c.route} ${c.model} cut: ${JSON.stringify({ record: c, event: e })}`,
          ).toBeGreaterThanOrEqual(truth);
        }
      }
      // At least the call cutShort left (the mix's own leavers may all have left too early).
      console.log(`[usd-property ${seed}] ${cut} of ${billed.length} billed calls cut short`);
      expect(cut).toBeGreaterThan(0);
      // The ledger is the events' sum, and ClickHouse has every settlement at the same cost.
      for (const t of TEAMS) {
        const ledger = await s.settled(t);
        const own = [...settled.values()].filter((e) => e.tenant === t);
        expect(ledger.billedMicroUsd, t).toBe(own.reduce((n, e) => n + e.costMicroUsd, 0));
      }
      const raw = qualified(iso.database, 'events_raw_v1');
      await waitFor(
        async () => {
          const rows = await ch.query<{ tenant: string; n: string; usd: string }>(sql`
            SELECT tenant, count() AS n, sum(cost_micro_usd) AS usd FROM ${raw} FINAL
            WHERE type = 'reservation.settled' GROUP BY tenant ORDER BY tenant`);
          const want = TEAMS.map((t) => {
            const own = [...settled.values()].filter((e) => e.tenant === t);
            return [t, own.length, own.reduce((n, e) => n + e.costMicroUsd, 0)];
          }).filter((x) => x[1] !== 0);
          return (
            JSON.stringify(rows.map((x) => [x.tenant, Number(x.n), Number(x.usd)])) ===
            JSON.stringify(want)
          );
        },
        { what: 'ClickHouse has every settlement at its cost', timeoutMs: 20_000 },
      );
    });
  }, 300_000);
}

test('a client that leaves before the answer: audio and cache writes are billed as the provider bills them, never as text', async ({
  stack,
}) => {
  // The provider takes each request and never answers (its headers never come); each client
  // leaves once the provider has it (not after a fixed 300 ms: on a loaded box the edge had not
  // reached the provider by then, which never saw the call). The provider bills what it read:
  // the audio heard, the cache written.
  const s = await stack({
    patch: (c) => {
      teams(c);
      for (const t of c.tenants)
        if (t.id === 'u3') t.budgets = [{ window: 'day', limit: 5, unit: 'usd' }];
    },
    behaviour: { promptCacheMinTokens: 16 },
  });
  s.upstream.failNext({ status: 'hang', count: 4 });
  const leaving = async (path: string, headers: Record<string, string>, body: unknown) => {
    const taken = s.upstream.stats().errorsInjected.hang;
    const leave = new AbortController();
    let answered = false;
    const answer = fetch(`${s.edge.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
      signal: leave.signal,
    })
      .then((r) => r.text())
      .finally(() => (answered = true));
    await waitFor(() => answered || s.upstream.stats().errorsInjected.hang > taken, {
      timeoutMs: STUCK_MS,
      intervalMs: 5,
      what: `the provider took ${path}`,
    });
    leave.abort();
    await expect(answer).rejects.toThrow();
  };
  const bearer = { authorization: 'Bearer sk-u3' };
  const audio = [{ type: 'input_audio', input_audio: { data: WAV, format: 'wav' } }];
  await leaving('/v1/chat/completions', bearer, {
    model: 'gpt-audio',
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Transcribe.' }, ...audio] }],
    max_tokens: 40,
  });
  await leaving('/v1/chat/completions', bearer, {
    model: 'gpt-audio',
    messages: [{ role: 'user', content: 'Say hello.' }],
    modalities: ['text', 'audio'],
    audio: { voice: 'alloy', format: 'wav' },
    max_tokens: 40,
    stream: true,
  });
  for (const ttl of ['5m', '1h']) {
    await leaving(
      '/v1/messages',
      { 'x-api-key': 'sk-u3', 'anthropic-version': '2023-06-01' },
      {
        model: CLAUDE,
        max_tokens: 40,
        // Held at the standard price (auto would be held at the model's priority price).
        service_tier: 'standard_only',
        system: [
          { type: 'text', text: TEXTS[0]!.repeat(20), cache_control: { type: 'ephemeral', ttl } },
        ],
        messages: [{ role: 'user', content: 'Summarise.' }],
      },
    );
  }
  await s.settled('u3');
  const records = s.upstream.stats().recent;
  expect(records).toHaveLength(4);
  const events = await s.events(
    (e) => e.filter((x) => x.type === 'reservation.settled').length === 4,
  );
  const settled = new Map(
    events.flatMap((e) =>
      e.type === 'reservation.settled' ? [[e.reservationId, e] as const] : [],
    ),
  );
  // The provider billed each one (audio heard or made, the cache written); Holdfast billed at
  // least that, within the call's hold. Before: the prompt at the text input price, no output.
  for (const c of records) {
    const e = settled.get(c.clientRequestId!)!;
    expect(e.outcome).toBe('client_disconnected');
    const provider = providerBooks([c], providerPrices).microUsd;
    expect(provider, c.route).toBeGreaterThan(0);
    expect
      .soft(e.costMicroUsd, `${c.route} ${c.model} ${JSON.stringify(c)}`)
      .toBeGreaterThanOrEqual(provider);
    expect(e.costMicroUsd).toBeLessThanOrEqual(e.heldMicroUsd);
  }
});
