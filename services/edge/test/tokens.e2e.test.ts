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

/**
 * tokenizer `upstream` (docs/configuration.md): a self-hosted model is counted with its server's own
 * chat template and tokenizer (llama-server's /apply-template + /tokenize, which the mock
 * implements), so the edge's count equals the prompt_tokens the upstream then reports; an
 * upstream that cannot count falls back to the pessimistic estimate.
 */
test('tokenizer upstream: the edge counts with the upstream template and tokenizer, else estimates', async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      const base = String(c.upstreams[0]!.baseUrl);
      const broken = {
        ...c.upstreams[0]!,
        id: 'no-tokenizer',
        baseUrl: base.replace(/\/v1$/, '/elsewhere/v1'),
      };
      c.upstreams.push(broken);
      const price = { inputPerMTok: 0.1, outputPerMTok: 0.1 };
      c.models.push({
        id: 'smollm2-135m-instruct',
        upstream: 'default',
        tokenizer: 'upstream',
        price,
      });
      c.models.push({
        id: 'llama-elsewhere',
        upstream: 'no-tokenizer',
        tokenizer: 'upstream',
        price,
      });
      entry(c.tenants, 'multi').useCases = [
        { id: 'UC-2', maxTokens: 64, models: ['smollm2-135m-instruct', 'llama-elsewhere'] },
      ];
    },
  });
  const messages = [
    { role: 'system' as const, content: 'You write weekly account digests.' },
    {
      role: 'user' as const,
      content: 'Summarise: revenue up 4%, churn flat, two escalations closed.',
    },
  ];
  const { data, response } = await s
    .openai(KEYS.multi)
    .chat.completions.create({ model: 'smollm2-135m-instruct', messages, max_tokens: 16 })
    .withResponse();
  expect(Number(response.headers.get('x-holdfast-prompt-tokens'))).toBe(data.usage?.prompt_tokens);

  // The second model's server has no /apply-template: 3 characters a token of every text.
  const res = await fetch(`${s.edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEYS.multi}` },
    body: JSON.stringify({ model: 'llama-elsewhere', messages, max_tokens: 16 }),
  });
  expect(res.status).toBe(502);
  const events = await s.events(
    (e) => e.filter((x) => x.type === 'reservation.created').length === 2,
  );
  const created = events.filter((e) => e.type === 'reservation.created');
  const estimate = await s.edge.app.counter.countChat({ model: 'x', messages }, 'estimate');
  expect(created[1]).toMatchObject({ model: 'llama-elsewhere', promptTokens: estimate });
});
