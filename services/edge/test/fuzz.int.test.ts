import type { UsageReply } from '@holdfast/events';
import { expect } from 'vitest';
import { fuzzAnySurface, fuzzCase, prng, type FuzzCase, type FuzzTarget } from './fuzz.js';
import { edgeTest as test, KEYS, type Stack } from './harness.js';
import { CLAUDE, withClaude } from './surfaces.js';

const BODY_LIMIT = 16 * 1024;

/** support-bot's key, use case and models: every case must fail for another reason. */
const TARGET: FuzzTarget = {
  key: KEYS.support,
  useCase: 'UC-101',
  model: 'gpt-4o-mini',
  embeddingModel: 'text-embedding-3-small',
  bodyLimit: BODY_LIMIT,
  trustHeaders: false,
  team: 'support-bot',
};

/** Every tenant's budget state, without the timestamp. */
async function budgets(s: Stack): Promise<UsageReply['tenants']> {
  const r = await s.client.usage({});
  if (!r.ok) throw new Error(r.error.code);
  return r.value.tenants;
}

/**
 * Sends `count` random malformed requests through fastify's inject (no sockets, so 10,000 fit
 * in seconds); none may get a 5xx, change a budget, or reach the model.
 */
async function fuzz(
  s: Stack,
  target: FuzzTarget,
  count: number,
  seed: number,
  make: (r: () => number, t: FuzzTarget) => FuzzCase = fuzzCase,
) {
  const before = await budgets(s);
  const rand = prng(seed);
  const statuses = new Map<number, number>();
  const urls = new Map<string, number>();
  for (let i = 0; i < count; i++) {
    const c = make(rand, target);
    urls.set(c.url, (urls.get(c.url) ?? 0) + 1);
    const res = await s.edge.app.inject({
      method: 'POST',
      url: c.url,
      headers: c.headers,
      payload: c.payload,
    });
    statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
    const context = `case ${i} (${c.defects.join(', ')}): ${String(c.payload).slice(0, 300)}`;
    expect(res.statusCode, context).toBeGreaterThanOrEqual(400);
    expect(res.statusCode, context).toBeLessThan(500);
    const body = res.json<{ type?: string; error: Record<string, unknown> }>();
    if (c.url.startsWith('/v1/messages')) {
      // Anthropic's error shape, our code in a header.
      expect(body.type, context).toBe('error');
      expect(Object.keys(body.error).sort(), context).toEqual(['message', 'type']);
      expect(res.headers['x-holdfast-error-code'], context).toBeTypeOf('string');
    } else {
      expect(Object.keys(body.error).sort(), context).toEqual(['code', 'message', 'param', 'type']);
    }
  }
  // No model call on any surface, not even a count of the prompt.
  expect(s.upstream.stats().requests).toMatchObject({
    chatCompletions: 0,
    embeddings: 0,
    responses: 0,
    responsesInputTokens: 0,
    messages: 0,
    messagesCountTokens: 0,
  });
  expect(await budgets(s)).toEqual(before);
  // A refusal may be recorded (admission.refused); nothing is ever held.
  const events = await s.events();
  expect(events.filter((e) => e.type.startsWith('reservation.'))).toEqual([]);
  console.log('[fuzz] cases by surface:', Object.fromEntries(urls));
  return Object.fromEntries([...statuses].sort(([a], [b]) => a - b));
}

/**
 * The edge under fuzz. Refusals it answers from memory (a use case or model made up again)
 * wait for their report; every 5 ms, so the requests, sent one at a time, do not wait 50 ms.
 */
const EDGE = { bodyLimitBytes: BODY_LIMIT, refusals: { memoryMs: 1_000, reportMs: 5 } };

test('10,000 malformed requests with keys: no 5xx, no budget change, nothing reaches the model', async ({
  stack,
}) => {
  const s = await stack({ edge: { options: EDGE } });
  const statuses = await fuzz(s, TARGET, 10_000, 20261130);
  console.log('[fuzz] statuses (key mode):', statuses);
  expect(Object.keys(statuses).sort()).toEqual(['400', '401', '403', '413']);
});

test('3,000 malformed requests to every surface in trustHeaders mode (x-team injection included)', async ({
  stack,
}) => {
  const s = await stack({
    edge: { options: EDGE },
    patch: (c) => {
      withClaude(c);
      c.auth.trustHeaders = true;
    },
  });
  const statuses = await fuzz(
    s,
    { ...TARGET, trustHeaders: true, claude: CLAUDE },
    3_000,
    7,
    fuzzAnySurface,
  );
  console.log('[fuzz] statuses (trustHeaders mode):', statuses);
  expect(statuses['403']).toBeGreaterThan(0);
});

test('6,000 malformed requests to every surface (Responses, Messages and count_tokens with their own fields): no 5xx, no budget change, nothing reaches the model', async ({
  stack,
}) => {
  const s = await stack({ edge: { options: EDGE }, patch: withClaude });
  const statuses = await fuzz(
    s,
    { ...TARGET, claude: CLAUDE },
    Number(process.env.FUZZ_CASES ?? 6_000),
    Number(process.env.FUZZ_SEED ?? 20261205),
    fuzzAnySurface,
  );
  console.log('[fuzz] statuses (every surface):', statuses);
  expect(Object.keys(statuses).sort()).toEqual(['400', '401', '403', '413']);
});
