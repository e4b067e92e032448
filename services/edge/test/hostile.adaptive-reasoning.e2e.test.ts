import { expect } from 'vitest';
import { APIError } from 'openai';
import { edgeTest as test, entry, KEYS, type Stack } from './harness.js';
import { words } from './surfaces.js';

/**
 * Red team, adaptive mode and reasoning the edge never sees (found by an audit of the
 * Responses surface). An adaptive call is held its prompt plus a recent percentile of real
 * output, and its hold grows as the output streams; but a reasoning model thinks before it
 * writes and streams none of it (Responses' reasoning item carries no text, Chat Completions
 * sends nothing), so the edge has nothing to grow the hold on. A team that trains the
 * percentile with short answers, then asks for reasoning, had each call held ~40 tokens and
 * billed ~940, far past its limit, with no debt bound to stop it. A call that asks for
 * reasoning cannot grow its hold: it is held as one (what it may still overrun within the
 * budget's debt), so the budget holds.
 */

const LIMIT = 10_000;
const MAX_OUTPUT = 1_024;

async function adaptiveStack(stack: (o: object) => Promise<Stack>): Promise<Stack> {
  return stack({
    behaviour: { completion: { mode: 'fixed', tokens: 10 }, reasoningTokens: 900 },
    patch: (c: { tenants: Array<Record<string, unknown> & { id: string }> }) => {
      const t = entry(c.tenants, 'batch-summariser');
      t.mode = 'adaptive';
      t.adaptive = { percentile: 0.95, minSamples: 5, samples: 50 };
      t.budgets = [{ window: 'month', limit: LIMIT, unit: 'tokens' }];
    },
  });
}

const calls = {
  responses: (s: Stack, reasoning: boolean) =>
    s
      .openai(KEYS.batch)
      .responses.create({
        model: 'gpt-4o-mini',
        input: words(20),
        max_output_tokens: MAX_OUTPUT,
        ...(reasoning ? { reasoning: { effort: 'medium' as const } } : {}),
      })
      .then(() => undefined),
  chat: (s: Stack, reasoning: boolean) =>
    s
      .openai(KEYS.batch)
      .chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: words(20) }],
        max_tokens: MAX_OUTPUT,
        ...(reasoning ? { reasoning_effort: 'medium' as const } : {}),
      })
      .then(() => undefined),
};

for (const api of ['responses', 'chat'] as const) {
  test(`${api}: adaptive calls asking for reasoning, the percentile trained on short answers: billed never past the limit`, async ({
    stack,
  }) => {
    const s = await adaptiveStack(stack);
    // Five short answers: the hold's estimate is now 10 output tokens.
    for (let i = 0; i < 5; i++) await calls[api](s, false);
    await s.settled('batch-summariser');
    // Then twelve at once that think 900 tokens before their 10.
    const outcomes = await Promise.all(
      Array.from({ length: 12 }, () =>
        calls[api](s, true).then(
          () => 'served',
          (e: unknown) => (e instanceof APIError ? String(e.status) : String(e)),
        ),
      ),
    );
    const usage = await s.settled('batch-summariser');
    const provider = s.upstream.stats().billed;
    expect(outcomes).toContain('served');
    expect(outcomes.every((o) => o === 'served' || o === '429')).toBe(true);
    expect(provider.promptTokens + provider.completionTokens).toBeLessThanOrEqual(LIMIT);
    expect(usage.billedTokens).toBe(provider.promptTokens + provider.completionTokens);
  });
}
