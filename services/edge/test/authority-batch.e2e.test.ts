import { batchStats } from '@holdfast/budget-authority/testing';
import { expect } from 'vitest';
import { chat, edgeTest as test, KEYS, type Stack } from './harness.js';

/** 48 calls at once from one tenant; what the provider reported, summed. */
async function burst(s: Stack): Promise<number> {
  const client = s.openai(KEYS.multi);
  const replies = await Promise.all(
    Array.from({ length: 48 }, () => client.chat.completions.create(chat(20, { max_tokens: 64 }))),
  );
  return replies.reduce((n, r) => n + r.usage!.prompt_tokens + r.usage!.completion_tokens, 0);
}

const behaviour = { firstTokenLatencyMs: 20, completion: { mode: 'fixed' as const, tokens: 30 } };

test('calls in flight together reach the authority in batches, each billed to the token', async ({
  stack,
}) => {
  const s = await stack({ behaviour });
  const reported = await burst(s);
  const usage = await s.settled('multi');
  expect(usage.billedTokens).toBe(reported);
  expect(usage.inFlight).toBe(0);
  const { batches, items } = await batchStats(s.authority);
  // 48 admits and 48 settles: most of them travelled with others.
  expect(batches).toBeGreaterThan(0);
  expect(items).toBeGreaterThan(48);
  expect(items).toBeLessThanOrEqual(96);
});

test('EDGE_AUTHORITY_BATCH off: every request goes alone, the books the same', async ({
  stack,
}) => {
  const s = await stack({ behaviour, edge: { options: { authorityBatch: false } } });
  const reported = await burst(s);
  const usage = await s.settled('multi');
  expect(usage.billedTokens).toBe(reported);
  expect(await batchStats(s.authority)).toEqual({ batches: 0, items: 0 });
});
