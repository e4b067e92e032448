import { REFERENCE_CASES } from '@holdfast/tokenizer';
import { expect } from 'vitest';
import { edgeTest as test, entry, KEYS } from './harness.js';

/**
 * For OpenAI models the edge counts the prompt exactly as OpenAI bills it: every published
 * case (openai-cookbook, How_to_count_tokens_with_tiktoken.ipynb, sections 6 and 7: chat
 * framing, names, tools) replayed through the edge shows OpenAI's prompt_tokens in
 * x-holdfast-prompt-tokens.
 */
test('x-holdfast-prompt-tokens equals the prompt_tokens OpenAI reported for every reference case', async ({
  stack,
}) => {
  const models = [...new Set(REFERENCE_CASES.map((c) => c.request.model))];
  const s = await stack({
    patch: (c) => {
      for (const m of models.filter((id) => id !== 'gpt-4o-mini')) {
        const tokenizer = REFERENCE_CASES.find((r) => r.request.model === m)!.encoding;
        c.models.push({
          id: m,
          upstream: 'default',
          tokenizer,
          price: { inputPerMTok: 1, outputPerMTok: 1 },
        });
      }
      entry(c.tenants, 'multi').useCases = [{ id: 'UC-2', maxTokens: 64, models }];
    },
  });
  expect(REFERENCE_CASES.length).toBeGreaterThanOrEqual(9);
  for (const ref of REFERENCE_CASES) {
    const res = await fetch(`${s.edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEYS.multi}` },
      body: JSON.stringify(ref.request),
    });
    expect(res.status, ref.source).toBe(200);
    expect(res.headers.get('x-holdfast-prompt-tokens'), `${ref.request.model}: ${ref.source}`).toBe(
      String(ref.promptTokens),
    );
    const body = (await res.json()) as { usage: { prompt_tokens: number } };
    expect(body.usage.prompt_tokens).toBe(ref.promptTokens);
  }
  await s.settled('multi');
});
