import { sha256Hex } from '../src/index.js';
import { expect } from 'vitest';
import { edgeTest as test, entry, type Stack, type TestConfig } from './harness.js';

/**
 * Issue 16 part 1: an upstream's account limits as a budget every tenant shares, by priority.
 * The mock upstream enforces a 20,000 tokens-per-minute account limit the way OpenAI counts it
 * (prompt + max_tokens on arrival) and answers 429 past it; its own counters are the truth.
 */

const LIMIT = 20_000;

/** Two teams behind one upstream: `hi` (high priority) and `lo` (low), large budgets. */
function twoTeams(c: TestConfig, declared: number | null): void {
  if (declared !== null) {
    entry(c.upstreams, 'default').capacity = { tokensPerMinute: declared, counting: 'requested' };
  }
  entry(c.upstreams, 'default').maxRetries = 0;
  const team = (id: string, priority: string) => ({
    id,
    mode: 'reserve',
    priority,
    budgets: [{ window: 'month', limit: 1_000_000, unit: 'tokens' }],
    useCases: [{ id: 'uc', maxTokens: 400, models: ['gpt-4o-mini'] }],
    keys: [{ id: `${id}-key`, sha256: sha256Hex(`sk-${id}`) }],
  });
  c.tenants = [team('hi', 'high'), team('lo', 'low')];
}

interface Tally {
  served: number;
  admittedTokens: number;
  upstreamCapacity: number;
  upstreamRateLimited: number;
}

/** One call of about 100 prompt tokens and max_tokens 400: its status, error code and hold. */
async function one(
  s: Stack,
  team: string,
): Promise<{ status: number; code?: string; held: number }> {
  const text = Array.from({ length: 100 }, (_, i) => (i % 2 ? 'budget' : 'report')).join(' ');
  const res = await fetch(`${s.edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer sk-${team}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: text }],
      max_tokens: 400,
    }),
  });
  const body = (await res.json()) as { error?: { code?: string; message?: string } };
  const held = Number(res.headers.get('x-holdfast-held') ?? 0);
  return { status: res.status, held, ...(body.error?.code ? { code: body.error.code } : {}) };
}

/** 16 workers per team, each 6 calls of about 100 prompt tokens and max_tokens 400. */
async function load(s: Stack): Promise<Record<'hi' | 'lo', Tally>> {
  const tally = {
    hi: { served: 0, admittedTokens: 0, upstreamCapacity: 0, upstreamRateLimited: 0 },
    lo: { served: 0, admittedTokens: 0, upstreamCapacity: 0, upstreamRateLimited: 0 },
  };
  const worker = async (team: 'hi' | 'lo') => {
    for (let i = 0; i < 6; i++) {
      const res = await one(s, team);
      const t = tally[team];
      if (res.status === 200) {
        t.served++;
        t.admittedTokens += res.held;
      } else if (res.code === 'upstream_capacity') t.upstreamCapacity++;
      else if (res.code === 'upstream_rate_limited') t.upstreamRateLimited++;
      else throw new Error(`unexpected ${res.status} ${res.code}`);
    }
  };
  await Promise.all(Array.from({ length: 32 }, (_, w) => worker(w % 2 === 0 ? 'hi' : 'lo')));
  return tally;
}

const account = {
  capacity: { tokensPerMinute: LIMIT, requestsPerMinute: null, count: 'requested' as const },
};

test('without a declared capacity (as before): the provider refuses what the gateway admitted', async ({
  stack,
}) => {
  const s = await stack({ patch: (c) => twoTeams(c, null), behaviour: account });
  const tally = await load(s);
  const cap = s.upstream.stats().capacity;
  // The gateway sent everything; the provider turned much of it away with 429s.
  expect(cap.rejected).toBeGreaterThan(20);
  expect(tally.hi.upstreamRateLimited + tally.lo.upstreamRateLimited).toBeGreaterThan(20);
  console.log(`undeclared: the mock sent ${cap.rejected} 429s; ${JSON.stringify(tally)}`);
});

test('with the capacity declared: the provider never sees more than its limit, sends no 429, and high priority keeps its room', async ({
  stack,
}) => {
  const s = await stack({ patch: (c) => twoTeams(c, LIMIT), behaviour: account });
  const tally = await load(s);
  const cap = s.upstream.stats().capacity;
  console.log(`declared: the mock sent ${cap.rejected} 429s; ${JSON.stringify(tally)}`);
  expect(cap.rejected).toBe(0);
  expect(cap.peak.tokens).toBeLessThanOrEqual(LIMIT);
  // Low priority stops at its 70% share; high has the rest, so it is served past it.
  expect(tally.lo.admittedTokens).toBeLessThanOrEqual(0.7 * LIMIT);
  expect(tally.hi.admittedTokens).toBeGreaterThanOrEqual(LIMIT - 0.7 * LIMIT - 500);
  expect(tally.lo.upstreamCapacity).toBeGreaterThan(0);
  expect(tally.hi.upstreamRateLimited + tally.lo.upstreamRateLimited).toBe(0);
  // Ours is a 429 of its own, with Retry-After, distinguishable from the provider's.
  const refused = await fetch(`${s.edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: 'Bearer sk-lo', 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x' }] }),
  });
  expect(refused.status).toBe(429);
  expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(((await refused.json()) as { error: { code: string } }).error.code).toBe(
    'upstream_capacity',
  );
  // The capacity use is visible (status page, /v1/budgets for the admin, the usage reply).
  const usage = await s.client.usage({});
  expect(usage.ok && usage.value.capacity[0]).toMatchObject({
    upstream: 'default',
    tokensPerMinute: LIMIT,
  });
  // Who was shed is an event: refusals with code upstream_capacity.
  const events = await s.events((e) => e.some((x) => x.type === 'admission.refused'));
  expect(events.some((e) => e.type === 'admission.refused' && e.code === 'upstream_capacity')).toBe(
    true,
  );
});

test("a provider's 429 blocks the upstream for its Retry-After: the gateway stops sending", async ({
  stack,
}) => {
  // The config promises twice what the account really has; the provider's 429 corrects it.
  const s = await stack({
    patch: (c) => twoTeams(c, 2 * LIMIT),
    behaviour: account,
  });
  await load(s);
  const cap = s.upstream.stats().capacity;
  console.log(`declared twice the account: the mock sent ${cap.rejected} 429s`);
  // Without the reports this workload drew 150 429s (the first test); with them, only calls
  // already on their way when the first 429 came back (at most one per worker).
  expect(cap.rejected).toBeLessThanOrEqual(32);
  const usage = await s.client.usage({});
  expect(usage.ok && usage.value.capacity[0]?.blockedUntil).not.toBeNull();
});

test('a call waits for capacity up to its maxQueueMs, then is served', async ({ stack }) => {
  const s = await stack({
    patch: (c) => {
      twoTeams(c, 1_000);
      entry(c.tenants, 'hi').maxQueueMs = 5_000;
      entry(c.upstreams, 'default').capacity = {
        tokensPerMinute: 100_000,
        requestsPerMinute: 1,
        counting: 'requested',
      };
    },
  });
  const ask = () =>
    fetch(`${s.edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: 'Bearer sk-hi', 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'x' }],
        max_tokens: 5,
      }),
    });
  expect((await ask()).status).toBe(200);
  // One request a minute: the next one waits its 5 s and is refused, having tried.
  const started = Date.now();
  const second = await ask();
  expect(second.status).toBe(429);
  expect(Date.now() - started).toBeGreaterThanOrEqual(4_500);
});

/** `hog` and `fair`, both normal priority, behind the declared 20,000-token account. */
function sameTier(c: TestConfig, tenantShare: number): void {
  twoTeams(c, LIMIT);
  for (const t of c.tenants) t.priority = 'normal';
  c.tenants[0]!.id = 'hog';
  c.tenants[1]!.id = 'fair';
  c.tenants[0]!.keys = [{ id: 'hog-key', sha256: sha256Hex('sk-hog') }];
  c.tenants[1]!.keys = [{ id: 'fair-key', sha256: sha256Hex('sk-fair') }];
  (c as unknown as { capacity: object }).capacity = { tenantShare };
}

/** The hog's 16 workers, 6 calls each, then the fair team's 8 calls: what each was answered. */
async function hogThenFair(s: Stack) {
  const hog = (
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        const out = [];
        for (let i = 0; i < 6; i++) out.push(await one(s, 'hog'));
        return out;
      }),
    )
  ).flat();
  const fair = await Promise.all(Array.from({ length: 8 }, () => one(s, 'fair')));
  const served = (xs: { status: number }[]) => xs.filter((x) => x.status === 200).length;
  return { hog, fair, hogServed: served(hog), fairServed: served(fair) };
}

test('without capacity.tenantShare (as before): one team of normal priority fills the 90% the priority may use, and another team of it gets nothing for the rest of the minute', async ({
  stack,
}) => {
  // Each call takes about 520 tokens of the window: the 90% a normal team may fill is 34
  // calls, half of the limit 19.
  const s = await stack({ patch: (c) => sameTier(c, 1), behaviour: account });
  const before = await hogThenFair(s);
  console.log(
    `tenantShare 1: hog served ${before.hogServed} of 96, fair ${before.fairServed} of 8`,
  );
  expect(before.hogServed * 520).toBeGreaterThan(0.8 * LIMIT);
  expect(before.fairServed).toBe(0);
});

for (const [how, patch] of [
  ['capacity.tenantShare', (c: TestConfig) => sameTier(c, 0.5)],
  [
    "the hog's own capacityShare",
    (c: TestConfig) => {
      sameTier(c, 1);
      c.tenants[0]!.capacityShare = 0.5;
    },
  ],
] as const) {
  test(`${how}: one team's 16 workers take at most its share of the upstream's minute, and another team of the same priority is still served`, async ({
    stack,
  }) => {
    const s = await stack({ patch, behaviour: account });
    const after = await hogThenFair(s);
    console.log(
      `tenantShare 0.5: hog served ${after.hogServed} of 96, fair ${after.fairServed} of 8`,
    );
    expect(after.hogServed * 520).toBeLessThanOrEqual(0.5 * LIMIT);
    expect(after.hogServed).toBeGreaterThan(10);
    expect(after.fairServed).toBe(8);
    for (const x of after.hog.filter((h) => h.status !== 200)) {
      expect(x).toMatchObject({ status: 429, code: 'upstream_capacity' });
    }
    // The provider never saw more than its limit, and sent no 429.
    const cap = s.upstream.stats().capacity;
    expect(cap.rejected).toBe(0);
    expect(cap.peak.tokens).toBeLessThanOrEqual(LIMIT);
    // The refusal names the team's share, not the priority's.
    const refused = await fetch(`${s.edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: 'Bearer sk-hog', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(refused.status).toBe(429);
    const message = ((await refused.json()) as { error: { message: string } }).error.message;
    expect(message).toContain(how === 'capacity.tenantShare' ? how : 'its capacityShare');
    expect(message).toContain('Team hog');
    // Nothing is left held.
    for (const team of ['hog', 'fair']) {
      expect((await s.settled(team)).windows[0]).toMatchObject({ held: 0 });
    }
  });
}

test("capacity.tenantShare: what a call took of its team's share is given back when its budget refuses it (the team's window does not fill with calls never sent)", async ({
  stack,
}) => {
  const s = await stack({
    // Every call asks the authority (no refusal answered again by the edge).
    edge: { options: { refusals: { memoryMs: 0, reportMs: 50 } } },
    patch: (c) => {
      // The hog's own capacityShare, the global tenantShare left at 1.
      sameTier(c, 1);
      c.tenants[0]!.capacityShare = 0.5;
      // A budget no call of ~520 tokens fits: each takes its capacity, then is refused.
      c.tenants[0]!.budgets = [{ window: 'month', limit: 300, unit: 'tokens' }];
    },
    behaviour: account,
  });
  // 30 x 520 is past the hog's 10,000: were the refused calls' shares kept, the last ones
  // would be refused for capacity.
  const codes = new Set<string | undefined>();
  for (let i = 0; i < 30; i++) codes.add((await one(s, 'hog')).code);
  expect([...codes]).toEqual(['budget_exceeded']);
  // And its share is all there for a call that fits.
  const usage = await s.client.usage({});
  expect(usage.ok && usage.value.capacity[0]).toMatchObject({ tokens: 0, requests: 0 });
});

test("capacity.tenantShare with counting usage: a call's take of its team's window is corrected to its usage when it settles, as the upstream's is", async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      sameTier(c, 0.5);
      entry(c.upstreams, 'default').capacity = { tokensPerMinute: LIMIT, counting: 'usage' };
    },
    // 16-token replies: each call is taken at ~520 and settles at ~120.
    behaviour: { completion: { mode: 'fixed', tokens: 16 } },
  });
  // 40 calls one after another: 20,800 tokens were they left at what they asked, past the
  // hog's 10,000; settled to their usage, about 4,800.
  const answers = [];
  for (let i = 0; i < 40; i++) answers.push(await one(s, 'hog'));
  expect(answers.filter((a) => a.status !== 200)).toEqual([]);
  const usage = await s.client.usage({});
  const tokens = usage.ok ? (usage.value.capacity[0]?.tokens ?? 0) : 0;
  expect(tokens).toBeGreaterThan(40 * 100);
  expect(tokens).toBeLessThan(40 * 200);
});

test('a share of a small limit still allows one request a minute: 30% of 3 requests a minute is 1, not 0', async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      sameTier(c, 0.3);
      entry(c.upstreams, 'default').capacity = { requestsPerMinute: 3, counting: 'requested' };
    },
  });
  // Before, floor(3 x 0.3) = 0: the team could never call the upstream.
  const first = await one(s, 'hog');
  const second = await one(s, 'hog');
  expect(first.status).toBe(200);
  expect(second).toMatchObject({ status: 429, code: 'upstream_capacity' });
  // The other team has its own (the normal priority may fill 2 of the 3).
  expect((await one(s, 'fair')).status).toBe(200);
});

for (const who of ['priority', 'tenant'] as const) {
  test(`a call larger than its ${who === 'priority' ? "priority's" : "team's"} share of the whole minute can never fit: 429 upstream_capacity at once, no Retry-After, x-should-retry false`, async ({
    stack,
  }) => {
    // ~510 tokens a call (about 100 of prompt and max_tokens 400) against 600 a minute: low
    // priority's 70% (420) never holds one; high's 100% does, until tenantShare 0.5 (300).
    const s = await stack({
      patch: (c) => {
        twoTeams(c, 600);
        for (const t of c.tenants) t.maxQueueMs = 5_000;
        if (who === 'tenant')
          (c as unknown as { capacity: object }).capacity = { tenantShare: 0.5 };
      },
    });
    const team = who === 'priority' ? 'lo' : 'hi';
    const started = Date.now();
    const res = await fetch(`${s.edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer sk-${team}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'gpt-4o-mini',
        messages: [
          { role: 'user', content: Array.from({ length: 100 }, () => 'report').join(' ') },
        ],
        max_tokens: 400,
      }),
    });
    const body = (await res.json()) as { error: { code: string; message: string } };
    console.log(
      `${res.status} retry-after ${res.headers.get('retry-after')}: ${body.error.message}`,
    );
    expect(res.status).toBe(429);
    expect(body.error.code).toBe('upstream_capacity');
    // Before, Retry-After: 60 on every ask, and the edge waited out maxQueueMs for room that
    // can never come.
    expect(res.headers.get('retry-after')).toBeNull();
    expect(res.headers.get('x-should-retry')).toBe('false');
    expect(Date.now() - started).toBeLessThan(2_500);
    expect(body.error.message).toContain('never');
    // The window is empty: nothing was taken for it.
    expect(s.upstream.stats().requests.chatCompletions).toBe(0);
    if (who === 'priority') expect((await one(s, 'hi')).status).toBe(200);
  });
}
