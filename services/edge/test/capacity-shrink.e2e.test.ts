import { sha256Hex } from '../src/index.js';
import { expect } from 'vitest';
import { edgeTest as test, entry, type Stack, type TestConfig } from './harness.js';
import { CLAUDE, withClaude, words } from './surfaces.js';

/**
 * Issue 16: the tokens a provider says are left lower the capacity the gateway admits against,
 * before the provider has to refuse anything. The config promises twice the mock's real
 * 20,000-token account; the mock answers every call with its remaining-tokens headers (OpenAI's
 * `x-ratelimit-*`, Anthropic's `anthropic-ratelimit-*`). Once fewer than 10 % of the declared
 * limit are left, the edge reports it and the authority admits only what is left: the calls
 * past it are our 429 `upstream_capacity`, and the provider never sends a 429.
 */

const LIMIT = 20_000;

const SURFACES = [
  { name: 'chat (x-ratelimit-*)', upstream: 'default', model: 'gpt-4o-mini', path: 'chat' },
  { name: 'messages (anthropic-ratelimit-*)', upstream: 'claude', model: CLAUDE, path: 'messages' },
] as const;

type Surface = (typeof SURFACES)[number];

function config(c: TestConfig, s: Surface): void {
  withClaude(c);
  const upstream = entry(c.upstreams, s.upstream);
  upstream.capacity = { tokensPerMinute: 2 * LIMIT };
  upstream.maxRetries = 0;
  c.tenants = [
    {
      id: 'team',
      mode: 'reserve',
      priority: 'high',
      budgets: [{ window: 'month', limit: 1_000_000, unit: 'tokens' }],
      useCases: [{ id: 'uc', maxTokens: 400, models: [s.model] }],
      keys: [{ id: 'team-key', sha256: sha256Hex('sk-team') }],
    },
  ];
}

async function call(stack: Stack, s: Surface): Promise<string> {
  const messages = [{ role: 'user', content: words(100) }];
  const res =
    s.path === 'chat'
      ? await fetch(`${stack.edge.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: 'Bearer sk-team', 'content-type': 'application/json' },
          body: JSON.stringify({ model: s.model, messages, max_tokens: 400 }),
        })
      : await fetch(`${stack.edge.url}/v1/messages`, {
          method: 'POST',
          headers: { 'x-api-key': 'sk-team', 'content-type': 'application/json' },
          body: JSON.stringify({ model: s.model, messages, max_tokens: 400 }),
        });
  await res.text();
  return res.status === 200 ? 'served' : (res.headers.get('x-holdfast-error-code') ?? 'unknown');
}

for (const s of SURFACES) {
  test(`${s.name}: a low remaining-tokens header shrinks the capacity before the provider refuses`, async ({
    stack,
  }) => {
    const st = await stack({
      patch: (c) => config(c, s),
      behaviour: {
        capacity: { tokensPerMinute: LIMIT, requestsPerMinute: null, count: 'requested' },
      },
    });
    const outcomes: Record<string, number> = {};
    // One call at a time, so each report lands before the calls it is about: ~500 tokens each,
    // 60 calls would be 30,000 tokens, over the real account and under the declared one.
    for (let i = 0; i < 60; i++) {
      const o = await call(st, s);
      outcomes[o] = (outcomes[o] ?? 0) + 1;
      // The report is fire and forget: give it a moment once the account runs low.
      if (i > 25) await new Promise((r) => setTimeout(r, 20));
    }
    const cap = st.upstream.stats().capacity;
    console.log(`${s.name}: ${JSON.stringify(outcomes)}; the mock sent ${cap.rejected} 429s`);
    expect(cap.rejected).toBe(0);
    expect(cap.peak.tokens).toBeLessThanOrEqual(LIMIT);
    expect(outcomes.upstream_capacity).toBeGreaterThan(0);
    expect(outcomes.served).toBeGreaterThan(30);
    expect(Object.keys(outcomes).sort()).toEqual(['served', 'upstream_capacity']);
  });
}
