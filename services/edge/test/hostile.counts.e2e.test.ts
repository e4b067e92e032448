import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { edgeTest as test, entry, KEYS, tenantMetric, type TestConfig } from './harness.js';
import { CLAUDE, post, responsesFile, withClaude } from './surfaces.js';

/**
 * Red team, the upstream's counting endpoints. A model counted by its upstream (`tokenizer:
 * upstream`), and any call with input only the upstream can size (a PDF), needs a request to
 * the upstream's count_tokens or input_tokens before it is held. Those requests go over the
 * same connections as calls, and the provider rate-limits them apart from its models. A tenant
 * flooding `POST /v1/messages/count_tokens` must not take the connections other tenants' calls
 * and counts need, and an upstream that rate-limits its counting must get a retryable answer,
 * never a 400 that blames the call.
 */

/** A tiny PDF: only the upstream can say what it costs (the mock bills its two pages). */
const PDF = 'JVBERi0xLjQKJcfsj6IK';

const document = (text: string) => ({
  model: CLAUDE,
  max_tokens: 20,
  messages: [
    {
      role: 'user',
      content: [
        { type: 'text', text },
        { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: PDF } },
      ],
    },
  ],
});

const countBody = { model: CLAUDE, messages: [{ role: 'user', content: 'How long is this?' }] };

/** A count_tokens body of its own (the edge answers a request it counted moments ago itself). */
const countOf = (i: number) => ({
  ...countBody,
  messages: [{ role: 'user', content: `How long is this, number ${i}?` }],
});

const claude = (key: string) => ({ 'x-api-key': key });

function roomy(c: TestConfig): void {
  withClaude(c);
  for (const id of ['support-bot', 'batch-summariser']) {
    entry(c.tenants, id).budgets = [{ window: 'month', limit: 1_000_000, unit: 'tokens' }];
  }
}

test("a tenant flooding count_tokens holds at most its share of the upstream's connections: its counts past it are answered locally, and another tenant's PDF is still counted upstream and served", async ({
  stack,
}) => {
  const s = await stack({
    // 4 connections to the mock, 2 at most for one tenant; each count takes the upstream 700 ms.
    edge: { options: { upstream: { connections: 4, tenantShare: 0.5 } } },
    behaviour: { counting: { latencyMs: 700 } },
    patch: roomy,
  });
  // Before, 16 counts queued on the 4 connections for 4 x 700 ms: another tenant's count waited
  // past the edge's 2 s count timeout, and its PDF call was refused as uncountable.
  const flood = Array.from({ length: 16 }, (_, i) =>
    post(s, '/v1/messages/count_tokens', countOf(i), claude(KEYS.support)),
  );
  await waitFor(() => s.upstream.stats().counting.inFlight >= 2 || undefined, {
    what: "the flood's counts upstream",
  });
  // The flooding tenant's own PDF needs an upstream count its share has no room for: a 429 it
  // retries, not a 400.
  const own = await post(s, '/v1/messages', document('Summarise this.'), claude(KEYS.support));
  expect(own.status).toBe(429);
  expect(own.body.error).toMatchObject({ type: 'rate_limit_error' });
  expect(own.headers.get('retry-after')).toBe('1');
  expect(JSON.stringify(own.body)).toContain('share of the connections');
  const started = performance.now();
  const other = await post(s, '/v1/messages', document('Summarise this.'), claude(KEYS.batch));
  const otherMs = performance.now() - started;
  expect(other.status).toBe(200);
  expect(otherMs).toBeLessThan(1_900);
  const counted = await Promise.all(flood);
  for (const c of counted) {
    expect(c.status).toBe(200);
    expect(c.body.input_tokens).toBeGreaterThan(0);
  }
  const stats = s.upstream.stats();
  // The flood's 2 and the other tenant's one.
  expect(stats.counting.peakInFlight).toBeLessThanOrEqual(3);
  expect(stats.requests.messagesCountTokens).toBeLessThan(16);
  expect(await tenantMetric(s, 'edge_upstream_share_refusals_total', 'support-bot')).toBe(
    16 + 1 - (stats.requests.messagesCountTokens - 1),
  );
  // Only the other tenant's call reached the model; nothing is left held.
  expect(stats.recent).toHaveLength(1);
  expect((await s.settled('support-bot')).windows[0]).toMatchObject({ used: 0, held: 0 });
  expect((await s.settled('batch-summariser')).windows[0]!.held).toBe(0);
});

test('an upstream that rate-limits its counting: a PDF call is a 429 upstream_rate_limited with its Retry-After (the edge does not ask again meanwhile), a plain count falls back to the local count, nothing is held or sent', async ({
  stack,
}) => {
  const s = await stack({ behaviour: { counting: { requestsPerMinute: 1 } }, patch: roomy });
  const first = await post(s, '/v1/messages', document('One.'), claude(KEYS.support));
  expect(first.status).toBe(200);
  // The upstream's one count a minute is spent: its 429 is the client's, with its wait.
  const second = await post(s, '/v1/messages', document('Two.'), claude(KEYS.support));
  expect(second.status).toBe(429);
  expect(second.body.error).toMatchObject({ type: 'rate_limit_error' });
  expect(Number(second.headers.get('retry-after'))).toBeGreaterThanOrEqual(50);
  expect(JSON.stringify(second.body)).toContain('rate-limits its token counting');
  // Until then the edge answers without asking: one 429 from the upstream, not one a call.
  const third = await post(s, '/v1/messages', document('Three.'), claude(KEYS.batch));
  expect(third.status).toBe(429);
  expect(s.upstream.stats().counting.rejected).toBe(1);
  // A prompt the edge can count itself is counted locally meanwhile (its proven upper bound).
  const plain = await post(s, '/v1/messages/count_tokens', countBody, claude(KEYS.support));
  expect(plain.status).toBe(200);
  expect(plain.body.input_tokens).toBeGreaterThan(0);
  expect(s.upstream.stats().requests.messagesCountTokens).toBe(2);
  // Responses' input_tokens (another upstream, the same account): its 429 was a 400
  // invalid_request "the upstream rejected the request"; it is the upstream's limit.
  const file = responsesFile('gpt-4o-mini', `data:application/pdf;base64,${PDF}`);
  const responses = await post(s, '/v1/responses', file, {
    authorization: `Bearer ${KEYS.support}`,
  });
  expect(responses.status).toBe(429);
  expect(responses.body.error).toMatchObject({ code: 'upstream_rate_limited' });
  expect(s.upstream.stats().counting.rejected).toBe(2);
  // Each count refused or not asked is counted, by upstream: claude's 429, then the PDF call
  // and the plain count not asked; default's 429.
  const metrics = (await s.edge.app.inject({ method: 'GET', url: '/metrics' })).body;
  expect(metrics).toContain(
    'edge_upstream_counts_limited_total{upstream="claude",service="edge"} 3',
  );
  expect(metrics).toContain(
    'edge_upstream_counts_limited_total{upstream="default",service="edge"} 1',
  );
  // Meanwhile a team the authority refuses gets its own refusal, recorded (the check before a
  // count runs first), not the upstream's 429; and nothing is sent.
  await s.client.suspend({ tenant: 'support-bot', reason: 'hostile test', by: 'admin' });
  const suspended = await post(s, '/v1/messages', document('Four.'), claude(KEYS.support));
  expect(suspended.headers.get('x-holdfast-error-code')).toBe('tenant_suspended');
  expect(s.upstream.stats().requests.messagesCountTokens).toBe(2);
  await s.events((e) =>
    e.some((x) => x.type === 'admission.refused' && x.code === 'tenant_suspended'),
  );
  // Only the first call reached the model; nothing is left held.
  expect(s.upstream.stats().recent).toHaveLength(1);
  expect((await s.settled('support-bot')).windows[0]!.held).toBe(0);
  expect((await s.settled('batch-summariser')).windows[0]).toMatchObject({ used: 0, held: 0 });
});

test("an upstream whose counting fails with the edge's own key (401/403) or a timeout (408) is not the call's fault: a file is held on the model's allowance, not refused as a bad request", async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      roomy(c);
      c.models.push({
        ...entry(c.models, 'gpt-4o-mini'),
        id: 'gpt-files',
        upstreamStateAllowanceTokens: 6_000,
      });
      const uc = entry(
        entry(c.tenants, 'support-bot').useCases as { id: string; models: string[] }[],
        'UC-101',
      );
      uc.models.push('gpt-files');
    },
  });
  const auth = { authorization: `Bearer ${KEYS.support}` };
  const file = responsesFile('gpt-files', `data:application/pdf;base64,${PDF}`);
  for (const status of [401, 403, 408]) {
    s.upstream.configure({ counting: { failStatus: status } });
    // Before, a 4xx from input_tokens was 400 invalid_request "The upstream rejected the request".
    const r = await post(s, '/v1/responses', file, auth);
    expect(r.status).toBe(200);
    expect(Number(r.headers.get('x-holdfast-prompt-tokens'))).toBeGreaterThan(6_000);
  }
  // A request the upstream finds wrong (400) is still the caller's 400, nothing sent.
  s.upstream.configure({ counting: { failStatus: 400 } });
  const wrong = await post(s, '/v1/responses', file, auth);
  expect(wrong.status).toBe(400);
  expect(wrong.body.error).toMatchObject({ code: 'invalid_request' });
  expect(s.upstream.stats().recent).toHaveLength(3);
  expect((await s.settled('support-bot')).windows[0]).toMatchObject({ held: 0 });
});

test("a key naming a use case or a model its team does not have cannot make the edge count: no request to the upstream's counting endpoints, each refusal recorded, and a registered call still counted and served", async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      roomy(c);
      // A Claude model no use case allows.
      c.models.push({ ...entry(c.models, CLAUDE), id: 'claude-unlisted' });
    },
  });
  // Before, each of these was counted first, by the upstream's count_tokens (or input_tokens,
  // for a response that continues another), then refused by the authority: a key could spend
  // the provider's counting rate limit, which every tenant shares, on calls refused anyway.
  const calls = [
    ...Array.from({ length: 12 }, (_, i) =>
      post(s, '/v1/messages', document(`call ${i}`), {
        ...claude(KEYS.support),
        'x-use-case': `UC-${9_000 + i}`,
      }),
    ),
    ...Array.from({ length: 4 }, (_, i) =>
      post(
        s,
        '/v1/messages',
        { ...document(`call ${i}`), model: 'claude-unlisted' },
        {
          ...claude(KEYS.support),
          'x-use-case': 'UC-101',
        },
      ),
    ),
    post(
      s,
      '/v1/responses',
      { model: 'gpt-4o-mini', input: 'go on', previous_response_id: 'resp_1' },
      { authorization: `Bearer ${KEYS.support}`, 'x-use-case': 'UC-9999' },
    ),
  ];
  const answers = await Promise.all(calls);
  expect(answers.map((a) => a.status)).toEqual(Array(17).fill(403));
  expect(answers[0]!.body).toMatchObject({ type: 'error', error: { type: 'permission_error' } });
  expect(answers[12]!.headers.get('x-holdfast-error-code')).toBe('model_not_allowed');
  expect(s.upstream.stats().requests).toMatchObject({
    messagesCountTokens: 0,
    responsesInputTokens: 0,
    messages: 0,
    responses: 0,
  });
  // Each refusal is recorded as before (its prompt not counted: 0); past the tenant's
  // refusalEventsPerSecond (20) some would come as a summary event with its count.
  const refusals = (events: Awaited<ReturnType<typeof s.events>>, code?: string) =>
    events.reduce(
      (n, e) =>
        n + (e.type === 'admission.refused' && (!code || e.code === code) ? (e.count ?? 1) : 0),
      0,
    );
  const events = await s.events((e) => refusals(e) === 17);
  expect(refusals(events, 'model_not_allowed')).toBe(4);
  expect(refusals(events, 'use_case_not_registered')).toBe(13);
  expect(events.every((e) => e.type !== 'admission.refused' || e.promptTokens === 0)).toBe(true);
  // A registered call is counted upstream (the PDF) and served.
  const ok = await post(s, '/v1/messages', document('fine'), claude(KEYS.support));
  expect(ok.status).toBe(200);
  expect(s.upstream.stats().requests.messagesCountTokens).toBe(1);
  expect((await s.settled('support-bot')).windows[0]!.held).toBe(0);
});

test('a suspended tenant repeating a call only the upstream can count is refused before it is counted: no count request, every refusal recorded', async ({
  stack,
}) => {
  const s = await stack({ patch: roomy });
  await s.client.suspend({ tenant: 'support-bot', reason: 'hostile test', by: 'admin' });
  // The first is asked of the authority before its PDF is counted, and refused; the repeats are
  // answered from the refusal memory. Before, each was counted upstream, then refused.
  const first = await post(s, '/v1/messages', document('again'), claude(KEYS.support));
  expect(first.headers.get('x-holdfast-error-code')).toBe('tenant_suspended');
  const repeats = await Promise.all(
    Array.from({ length: 10 }, () =>
      post(s, '/v1/messages', document('again'), claude(KEYS.support)),
    ),
  );
  expect(repeats.map((r) => r.headers.get('x-holdfast-error-code'))).toEqual(
    Array(10).fill('tenant_suspended'),
  );
  expect(s.upstream.stats().requests).toMatchObject({ messagesCountTokens: 0, messages: 0 });
  const count = (events: Awaited<ReturnType<typeof s.events>>) =>
    events.reduce((n, e) => n + (e.type === 'admission.refused' ? (e.count ?? 1) : 0), 0);
  expect(count(await s.events((e) => count(e) === 11))).toBe(11);
});

test("a team over its budget sending different documents spends none of the provider's counting limit: each call is refused before it is counted when even an empty prompt would not fit, and a call that might fit is still counted", async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      roomy(c);
      // 15 tokens left: no call with 20 tokens of output fits, whatever its prompt.
      entry(c.tenants, 'support-bot').budgets = [{ window: 'month', limit: 15, unit: 'tokens' }];
    },
  });
  // Before, each different document was counted by the upstream (count_tokens, input_tokens),
  // then refused: a team over its budget could spend the counting limit every team shares.
  const calls = [
    ...Array.from({ length: 12 }, (_, i) =>
      post(s, '/v1/messages', document(`report ${i}`), claude(KEYS.support)),
    ),
    ...Array.from({ length: 4 }, (_, i) =>
      post(
        s,
        '/v1/responses',
        responsesFile('gpt-4o-mini', `data:application/pdf;base64,${PDF}${'A'.repeat(4 * i)}`),
        {
          authorization: `Bearer ${KEYS.support}`,
        },
      ),
    ),
  ];
  const answers = await Promise.all(calls);
  expect(answers.map((a) => a.headers.get('x-holdfast-error-code'))).toEqual(
    Array(16).fill('budget_exceeded'),
  );
  expect(s.upstream.stats().requests).toMatchObject({
    messagesCountTokens: 0,
    responsesInputTokens: 0,
    messages: 0,
    responses: 0,
  });
  const refusals = (events: Awaited<ReturnType<typeof s.events>>) =>
    events.reduce((n, e) => n + (e.type === 'admission.refused' ? (e.count ?? 1) : 0), 0);
  const events = await s.events((e) => refusals(e) === 16);
  expect(events.every((e) => e.type !== 'admission.refused' || e.promptTokens === 0)).toBe(true);
  // 10 tokens of output fit with an empty prompt: the document is counted, then refused.
  const small = await post(
    s,
    '/v1/messages',
    { ...document('report 0'), max_tokens: 10 },
    claude(KEYS.support),
  );
  expect(small.headers.get('x-holdfast-error-code')).toBe('budget_exceeded');
  expect(s.upstream.stats().requests.messagesCountTokens).toBe(1);
  expect((await s.settled('support-bot')).windows[0]).toMatchObject({ used: 0, held: 0 });
});

test('a team over its budget whose SDK retries the same document call asks the upstream to count it once: the count is kept a minute per team, and the refusal memory answers the repeats', async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      roomy(c);
      entry(c.tenants, 'support-bot').budgets = [{ window: 'month', limit: 100, unit: 'tokens' }];
    },
  });
  // Before, each attempt was counted upstream (the Anthropic client retries a 429 twice), then
  // refused: three count requests of the provider's shared limit for one refused call.
  const attempts = [];
  for (let i = 0; i < 3; i++) {
    attempts.push(await post(s, '/v1/messages', document('over'), claude(KEYS.support)));
  }
  expect(attempts.map((a) => a.headers.get('x-holdfast-error-code'))).toEqual(
    Array(3).fill('budget_exceeded'),
  );
  expect(s.upstream.stats().requests.messagesCountTokens).toBe(1);
  // Another team's same document is its own count (no team can time another's prompts).
  const other = await post(s, '/v1/messages', document('over'), claude(KEYS.batch));
  expect(other.status).toBe(200);
  expect(s.upstream.stats().requests.messagesCountTokens).toBe(2);
});

test("a team sending many documents takes at most its share of the provider's counting limit (countsPerMinute): past it, its document calls are a 429 and its plain counts are answered locally, and another team's documents are still counted and served", async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      roomy(c);
      // 10 counts a minute for everyone (normal priority: 9), each team at most 5.
      entry(c.upstreams, 'claude').countsPerMinute = 10;
      (c as unknown as { capacity: object }).capacity = { tenantShare: 0.5 };
    },
  });
  // Before, a team's different documents were each counted by the provider, however many: one
  // team could spend the counting limit every team's documents need.
  const calls = [];
  for (let i = 0; i < 8; i++) {
    calls.push(await post(s, '/v1/messages', document(`report ${i}`), claude(KEYS.support)));
  }
  expect(calls.map((c) => c.status)).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
  const refused = calls[5]!;
  expect(refused.headers.get('x-holdfast-error-code')).toBe('upstream_rate_limited');
  expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  expect(JSON.stringify(refused.body)).toContain('its share of upstream claude');
  expect(s.upstream.stats().requests).toMatchObject({ messagesCountTokens: 5, messages: 5 });
  // Its plain counts past its share: answered with the edge's own count, nothing sent.
  const count = await post(s, '/v1/messages/count_tokens', countOf(1), claude(KEYS.support));
  expect(count.status).toBe(200);
  expect(count.body.input_tokens).toBeGreaterThan(0);
  expect(s.upstream.stats().requests.messagesCountTokens).toBe(5);
  // Another team's document is counted and served (4 more of the priority's 9).
  const other = await post(s, '/v1/messages', document('report 0'), claude(KEYS.batch));
  expect(other.status).toBe(200);
  expect(s.upstream.stats().requests.messagesCountTokens).toBe(6);
  // The minute's counts, as /v1/budgets and the status page show them.
  const usage = await s.client.usage({});
  if (!usage.ok) throw new Error(usage.error.code);
  expect(usage.value.capacity.find((c) => c.upstream === 'claude')).toMatchObject({
    model: null,
    countsPerMinute: 10,
    counts: 6,
  });
  // Each count not asked is counted: 3 calls and the plain count.
  const metrics = (await s.edge.app.inject({ method: 'GET', url: '/metrics' })).body;
  expect(metrics).toContain(
    'edge_upstream_counts_limited_total{upstream="claude",service="edge"} 4',
  );
  expect((await s.settled('support-bot')).windows[0]!.held).toBe(0);
});
