import { httpProxy, type HttpProxy } from '@holdfast/testkit';
import { startMockUpstream, type MockUpstream } from '@holdfast/mock-upstream';
import { expect } from 'vitest';
import { sha256Hex } from '../src/index.js';
import { edgeTest as test, entry, type Stack, type TestConfig } from './harness.js';

/**
 * A provider's word on one model's limit is that model's (found by an audit of key, end-user
 * and capacity budgets). OpenAI's rate limits, and the `x-ratelimit-*` headers that report them,
 * are per model: one account, one upstream, gpt-4o at 20,000 tokens a minute beside
 * gpt-4o-mini at far more. Here one upstream serves both, each model from an account of its own
 * (a mock each behind one address), the upstream declaring 1,000,000 tokens a minute and
 * gpt-4o its own 20,000.
 */

const SMALL = 20_000;

/** One address, each model served by its own account: gpt-4o by `small`, the rest by `large`. */
function byModel(small: MockUpstream, large: MockUpstream): Promise<HttpProxy> {
  return httpProxy((_req, body) => {
    const model = (JSON.parse(body.toString() || '{}') as { model?: string }).model;
    return { target: model === 'gpt-4o' ? small.url : large.url };
  });
}

function config(url: string) {
  return (c: TestConfig): void => {
    const upstream = entry(c.upstreams, 'default');
    upstream.baseUrl = url;
    upstream.capacity = { tokensPerMinute: 1_000_000 };
    upstream.maxRetries = 0;
    const mini = entry(c.models, 'gpt-4o-mini');
    mini.fallbackUpstreams = [];
    c.models.push({ ...mini, id: 'gpt-4o', capacity: { tokensPerMinute: SMALL } });
    const team = (id: string, priority: string, model: string) => ({
      id,
      mode: 'reserve',
      priority,
      budgets: [{ window: 'month', limit: 10_000_000, unit: 'tokens' }],
      useCases: [{ id: 'uc', maxTokens: 400, models: [model] }],
      keys: [{ id: `${id}-key`, sha256: sha256Hex(`sk-${id}`) }],
    });
    c.tenants = [team('small', 'low', 'gpt-4o'), team('other', 'high', 'gpt-4o-mini')];
  };
}

/** One call of about 100 prompt tokens and max_tokens 400: served, or the refusal's code. */
async function call(s: Stack, team: string, model: string): Promise<string> {
  const text = Array.from({ length: 100 }, (_, i) => (i % 2 ? 'budget' : 'report')).join(' ');
  const res = await fetch(`${s.edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer sk-${team}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: text }], max_tokens: 400 }),
  });
  const body = (await res.json()) as { error?: { code?: string } };
  return res.status === 200 ? 'served' : (body.error?.code ?? String(res.status));
}

test("one model's low remaining tokens do not shrink the capacity of every other model on its upstream", async ({
  stack,
}) => {
  const small = await startMockUpstream({
    port: 0,
    behaviour: { capacity: { tokensPerMinute: SMALL, requestsPerMinute: null } },
  });
  const large = await startMockUpstream({
    port: 0,
    behaviour: { capacity: { tokensPerMinute: 1_000_000, requestsPerMinute: null } },
  });
  const router = await byModel(small, large);
  try {
    const s = await stack({
      patch: config(`${router.url}/v1`),
    });
    // A low-priority team's two gpt-4o calls: its account says ~19,000 tokens are left, which
    // is below 10% of the upstream's 1,000,000.
    expect(await call(s, 'small', 'gpt-4o')).toBe('served');
    await new Promise((r) => setTimeout(r, 1_100));
    expect(await call(s, 'small', 'gpt-4o')).toBe('served');
    await new Promise((r) => setTimeout(r, 200));
    // A high-priority team's 60 gpt-4o-mini calls (~30,000 tokens), well within the upstream's
    // declared 1,000,000 and mini's own account: before the fix the report of gpt-4o's tokens
    // left shrank the whole upstream to them, and this team was refused upstream_capacity.
    const outcomes: Record<string, number> = {};
    for (let i = 0; i < 60; i++) {
      const o = await call(s, 'other', 'gpt-4o-mini');
      outcomes[o] = (outcomes[o] ?? 0) + 1;
    }
    console.log(`gpt-4o-mini after gpt-4o's report: ${JSON.stringify(outcomes)}`);
    expect(outcomes).toEqual({ served: 60 });
    expect(large.stats().capacity.rejected).toBe(0);
    // gpt-4o's account refusing (a 429 for 30 s) blocks gpt-4o, and only gpt-4o: before the
    // fix it blocked the upstream, every model on it.
    small.failNext({ status: 429, count: 1, retryAfter: 30 });
    expect(await call(s, 'small', 'gpt-4o')).toBe('upstream_rate_limited');
    await new Promise((r) => setTimeout(r, 200));
    expect(await call(s, 'small', 'gpt-4o')).toBe('upstream_capacity');
    expect(await call(s, 'other', 'gpt-4o-mini')).toBe('served');
  } finally {
    await router.close();
    await small.stop();
    await large.stop();
  }
});
