import type { UsageReply } from '@holdfast/events';
import { expect } from 'vitest';
import { fuzzCase, prng, type FuzzTarget } from './fuzz.js';
import { edgeTest as test, KEYS, type Stack } from './harness.js';

const BODY_LIMIT = 16 * 1024;

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
async function fuzz(s: Stack, target: FuzzTarget, count: number, seed: number) {
  const before = await budgets(s);
  const rand = prng(seed);
  const statuses = new Map<number, number>();
  for (let i = 0; i < count; i++) {
    const c = fuzzCase(rand, target);
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
    const body = res.json<{ error: Record<string, unknown> }>();
    expect(Object.keys(body.error).sort(), context).toEqual(['code', 'message', 'param', 'type']);
  }
  const stats = s.upstream.stats();
  expect(stats.requests.chatCompletions + stats.requests.embeddings).toBe(0);
  expect(await budgets(s)).toEqual(before);
  return Object.fromEntries([...statuses].sort(([a], [b]) => a - b));
}

test('10,000 malformed requests with keys: no 5xx, no budget change, nothing reaches the model', async ({
  stack,
}) => {
  const s = await stack({ edge: { options: { bodyLimitBytes: BODY_LIMIT } } });
  const statuses = await fuzz(
    s,
    {
      key: KEYS.support,
      useCase: 'UC-101',
      model: 'gpt-4o-mini',
      embeddingModel: 'text-embedding-3-small',
      bodyLimit: BODY_LIMIT,
      trustHeaders: false,
      team: 'support-bot',
    },
    10_000,
    20261130,
  );
  console.log('[fuzz] statuses (key mode):', statuses);
  expect(Object.keys(statuses).sort()).toEqual(['400', '401', '403', '413']);
});

test('2,000 malformed requests in trustHeaders mode (x-team injection included)', async ({
  stack,
}) => {
  const s = await stack({
    edge: { options: { bodyLimitBytes: BODY_LIMIT } },
    patch: (c) => (c.auth.trustHeaders = true),
  });
  const statuses = await fuzz(
    s,
    {
      key: KEYS.support,
      useCase: 'UC-101',
      model: 'gpt-4o-mini',
      embeddingModel: 'text-embedding-3-small',
      bodyLimit: BODY_LIMIT,
      trustHeaders: true,
      team: 'support-bot',
    },
    2_000,
    7,
  );
  console.log('[fuzz] statuses (trustHeaders mode):', statuses);
  expect(statuses['403']).toBeGreaterThan(0);
});
