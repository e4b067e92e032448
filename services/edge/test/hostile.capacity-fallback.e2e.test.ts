import { startMockUpstream, type MockUpstream } from '@holdfast/mock-upstream';
import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { chat, edgeTest as test, entry, KEYS, type Stack, type TestConfig } from './harness.js';

/**
 * A call goes only where it took capacity (found by an audit of key, end-user and capacity
 * budgets): an admission takes the call's worst case of one upstream's declared capacity, and a
 * call going on to a fallback that declares one takes it there first (`capacity.move`), or
 * skips it when it has no room. Before, the call went to every fallback taking nothing of it.
 * The fallback here is a provider account of its own (a second mock) allowing 1,000 tokens a
 * minute, counted as OpenAI does (prompt + max_tokens on arrival): two calls of ~430 fit.
 */

const BACKUP_TPM = 1_000;

/**
 * The model's primary (the stack's mock) and its fallback, each declaring its capacity; then
 * `more`, a test's own changes.
 */
function withBackup(backup: MockUpstream, more?: (c: TestConfig) => void) {
  return (c: TestConfig) => {
    entry(c.upstreams, 'default').capacity = { tokensPerMinute: 1_000_000, counting: 'requested' };
    entry(c.upstreams, 'default').maxRetries = 0;
    const b = entry(c.upstreams, 'backup');
    b.baseUrl = backup.url;
    b.capacity = { tokensPerMinute: BACKUP_TPM, counting: 'requested' };
    entry(c.models, 'gpt-4o-mini').fallbackUpstreams = ['backup'];
    more?.(c);
  };
}

/** One call of max_tokens 400 (about 430 tokens of capacity): its status and error code. */
async function call(s: Stack): Promise<{ status: number; code?: string }> {
  const res = await fetch(`${s.edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEYS.support}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ...chat(5), max_tokens: 400 }),
  });
  const body = (await res.json()) as { error?: { code?: string } };
  return { status: res.status, ...(body.error?.code ? { code: body.error.code } : {}) };
}

/** Runs `use` with the fallback's account (a mock of its own), stopped after. */
async function withBackupAccount(use: (backup: MockUpstream) => Promise<void>): Promise<void> {
  const backup = await startMockUpstream({
    port: 0,
    behaviour: { capacity: { tokensPerMinute: BACKUP_TPM, requestsPerMinute: null } },
  });
  try {
    await use(backup);
  } finally {
    await backup.stop();
  }
}

/** What the backup's account saw: nothing past its limit, and no 429 of its own. */
function expectWithinBackup(backup: MockUpstream): void {
  const cap = backup.stats().capacity;
  expect(cap.rejected).toBe(0);
  expect(cap.peak.tokens).toBeLessThanOrEqual(BACKUP_TPM);
}

test("a client holding its share of the primary's connections cannot push calls onto a fallback past the fallback's declared capacity", async ({
  stack,
}) => {
  await withBackupAccount(async (backup) => {
    const s = await stack({
      // One connection per team to each origin.
      edge: { options: { upstream: { connections: 2, tenantShare: 0.5 } } },
      behaviour: { completion: { mode: 'fixed', tokens: 40 }, tokenDelayMs: 100 },
      patch: withBackup(backup),
    });
    // A slow stream holds the team's connection to the primary.
    const slow = s
      .openai(KEYS.support)
      .chat.completions.create({ ...chat(5), max_tokens: 40, stream: true })
      .then(async (stream) => {
        for await (const chunk of stream) void chunk;
      });
    await waitFor(() => s.upstream.stats().inFlight >= 1 || undefined, {
      what: 'the slow call upstream',
    });
    // Each of these is admitted against the primary's capacity (it has room) and finds the
    // team's connection to it taken: it goes on to the fallback while the fallback has room for
    // it (its capacity taken there), and past that gets the primary's answer. Before the fix all
    // 5 went to the fallback, which saw 5 x ~430 tokens in a minute against its 1,000.
    const results = [];
    for (let i = 0; i < 5; i++) results.push(await call(s));
    await slow;
    console.log(`calls past the primary's share: ${JSON.stringify(results)}`);
    console.log(`backup account: ${JSON.stringify(backup.stats().capacity.peak)}`);
    expectWithinBackup(backup);
    expect(results.slice(0, 2)).toEqual([{ status: 200 }, { status: 200 }]);
    expect(results.slice(2).map((r) => r.code)).toEqual([
      'concurrency_limit',
      'concurrency_limit',
      'concurrency_limit',
    ]);
    expect(backup.stats().capacity.peak.requests).toBe(2);
    await s.settled('support-bot');
  });
});

test('a call whose upstream fails goes on to a fallback that declares capacity while it has room for it', async ({
  stack,
}) => {
  await withBackupAccount(async (backup) => {
    const s = await stack({ patch: withBackup(backup) });
    // The primary fails each call once (a 500): before the fix all 5 went to the fallback.
    const results = [];
    for (let i = 0; i < 5; i++) {
      s.upstream.failNext({ status: 500, count: 1 });
      results.push(await call(s));
    }
    console.log(`calls whose primary failed: ${JSON.stringify(results)}`);
    console.log(`backup account: ${JSON.stringify(backup.stats().capacity.peak)}`);
    expectWithinBackup(backup);
    expect(results.map((r) => r.status)).toEqual([200, 200, 502, 502, 502]);
    await s.settled('support-bot');
    // What the calls took: the two served of the fallback (counted as requested, the minute's),
    // nothing left of the primary, which served none.
    const usage = await s.client.usage({});
    if (!usage.ok) throw new Error(usage.error.message);
    const capacity = Object.fromEntries(usage.value.capacity.map((c) => [c.upstream, c.tokens]));
    expect(capacity.default).toBe(0);
    expect(capacity.backup).toBe(backup.stats().capacity.peak.tokens);
  });
});

test("a call whose primary failed inside its stream after reading the prompt goes on to the fallback, and the primary's capacity keeps what its account counted", async ({
  stack,
}) => {
  await withBackupAccount(async (backup) => {
    const s = await stack({ patch: withBackup(backup) });
    // The primary answers 200, reads the prompt (billed) and fails in its stream (a chat error
    // chunk before any content): the call is retried on the fallback, its capacity moved there.
    s.upstream.failNext({ status: 'error', count: 1 });
    expect(await call(s)).toEqual({ status: 200 });
    expect(s.upstream.stats().requests.chatCompletions).toBe(1);
    expect(backup.stats().requests.chatCompletions).toBe(1);
    await s.settled('support-bot');
    // The primary's account counted the request (prompt + max_tokens on arrival) as the
    // fallback's did: the move keeps it on the primary's window instead of giving it back, so
    // the gateway does not send the primary more than its account takes.
    const usage = await s.client.usage({});
    if (!usage.ok) throw new Error(usage.error.message);
    const capacity = Object.fromEntries(usage.value.capacity.map((c) => [c.upstream, c.tokens]));
    expect(capacity.backup).toBe(backup.stats().capacity.peak.tokens);
    expect(capacity.default).toBe(capacity.backup);
  });
});

test('a fallback without room for the call is skipped for one that declares no capacity', async ({
  stack,
}) => {
  await withBackupAccount(async (backup) => {
    const s = await stack({
      patch: withBackup(backup, (c) => {
        // Too small for one call of ~430 tokens.
        entry(c.upstreams, 'backup').capacity = { tokensPerMinute: 400, counting: 'requested' };
        // The primary's own account under another name, declaring nothing.
        c.upstreams.push({ ...entry(c.upstreams, 'default'), id: 'spare', capacity: undefined });
        entry(c.models, 'gpt-4o-mini').fallbackUpstreams = ['backup', 'spare'];
      }),
    });
    s.upstream.failNext({ status: 500, count: 1 });
    expect(await call(s)).toEqual({ status: 200 });
    expect(s.upstream.stats().completed).toBe(1);
    expect(backup.stats().capacity.peak.requests).toBe(0);
    await s.settled('support-bot');
  });
});

test("a client forcing the primary's 5xx cannot send it more than its requestsPerMinute in a minute", async ({
  stack,
}) => {
  await withBackupAccount(async (backup) => {
    // The primary's account allows 3 requests a minute; the fallback declares nothing.
    const s = await stack({
      patch: withBackup(backup, (c) => {
        entry(c.upstreams, 'default').capacity = { requestsPerMinute: 3, counting: 'requested' };
        entry(c.upstreams, 'backup').capacity = undefined;
      }),
    });
    // Every request the primary gets is answered 500 (a client whose prompt makes it fail can
    // do that): each call goes on to the fallback. The provider counted each one it answered.
    s.upstream.failNext({ status: 500, count: 100 });
    const results = [];
    for (let i = 0; i < 8; i++) results.push(await call(s));
    await s.settled('support-bot');
    const primary = s.upstream.stats().requests.chatCompletions;
    console.log(`calls: ${JSON.stringify(results)}; requests to the primary: ${primary}`);
    // Before, each move gave the primary's request back: all 8 went to it first.
    expect(primary).toBeGreaterThan(0);
    expect(primary).toBeLessThanOrEqual(3);
  });
});

for (const maxRetries of [0, 2]) {
  test(`a client whose calls the model's only upstream answers 500 (maxRetries ${maxRetries}) is held to its share of its requestsPerMinute: each answered attempt counts`, async ({
    stack,
  }) => {
    // The account allows 3 requests a minute; no fallback. A release used to give the request
    // back to the window: all 8 calls (and each retry) went out.
    const s = await stack({
      patch: (c) => {
        const up = entry(c.upstreams, 'default');
        up.capacity = { requestsPerMinute: 3, counting: 'requested' };
        up.maxRetries = maxRetries;
      },
    });
    s.upstream.failNext({ status: 500, count: 100 });
    const results = [];
    for (let i = 0; i < 8; i++) results.push(await call(s));
    const sent = s.upstream.stats().requests.chatCompletions;
    console.log(`calls: ${JSON.stringify(results)}; requests to the upstream: ${sent}`);
    expect(sent).toBeGreaterThan(0);
    // Normal priority's share of 3 is 2 requests: each retry takes one before it is made
    // (capacity.retry) and the release keeps the admission's, so retries add none past it.
    expect(sent).toBeLessThanOrEqual(2);
    expect(results.filter((r) => r.code === 'upstream_capacity').length).toBeGreaterThan(0);
    // Nothing is billed or held for calls the provider answered with an error.
    expect((await s.settled('support-bot')).billedTokens).toBe(0);
  });
}

/**
 * The primary declaring `requestsPerMinute` alone, with retries on it (maxRetries 2) and no
 * fallback: the provider counts every attempt it answers.
 */
function retriedPrimary(requestsPerMinute: number) {
  return (c: TestConfig) => {
    const u = entry(c.upstreams, 'default');
    u.capacity = { requestsPerMinute, counting: 'requested' };
    u.maxRetries = 2;
  };
}

/** The requests the upstream's window counts in the last minute. */
async function windowRequests(s: Stack, upstream: string): Promise<number | undefined> {
  const usage = await s.client.usage({});
  if (!usage.ok) throw new Error(usage.error.message);
  return usage.value.capacity.find((c) => c.upstream === upstream)?.requests;
}

test('each retry on an upstream after its provider answered an attempt is a request of its requestsPerMinute', async ({
  stack,
}) => {
  const s = await stack({ patch: retriedPrimary(10) });
  // Two 500s, then the answer: the provider's account counted 3 requests.
  s.upstream.failNext({ status: 500, count: 2 });
  expect(await call(s)).toEqual({ status: 200 });
  await s.settled('support-bot');
  expect(s.upstream.stats().requests.chatCompletions).toBe(3);
  // Before, the window counted the call's one request: the gateway then sent the provider 3
  // times what it counted.
  expect(await windowRequests(s, 'default')).toBe(3);
});

test("a client forcing the primary's 5xx cannot send it more than its priority's share of requestsPerMinute through retries on it", async ({
  stack,
}) => {
  // 3 a minute: normal priority's share (0.9) is 2.
  const s = await stack({ patch: retriedPrimary(3) });
  s.upstream.failNext({ status: 500, count: 2 });
  const first = await call(s);
  const primary = s.upstream.stats().requests.chatCompletions;
  console.log(`call: ${JSON.stringify(first)}; requests to the primary: ${primary}`);
  // Before, its 3 attempts were 1 request counted: the third went out past the share (and
  // answered 200). Now the second retry finds no request left and is not made.
  expect(primary).toBe(2);
  expect(first.status).toBe(502);
  await s.settled('support-bot');
});
