import { expect } from 'vitest';
import { apiError, edgeTest as test, entry, KEYS } from './harness.js';
import { CLAUDE, withClaude, words } from './surfaces.js';

test('responses.create, not streaming: admitted, answered, settled to the provider usage, recorded as responses', async ({
  stack,
}) => {
  const s = await stack();
  const { data, response } = await s
    .openai(KEYS.support)
    .responses.create({ model: 'gpt-4o-mini', input: words(20), max_output_tokens: 100 })
    .withResponse();
  expect(data.status).toBe('completed');
  expect(data.output_text.split(' ')).toHaveLength(50);
  const prompt = data.usage?.input_tokens;
  expect(response.headers.get('x-holdfast-prompt-tokens')).toBe(String(prompt));
  expect(response.headers.get('x-holdfast-held')).toBe(String(prompt! + 100));
  expect(s.upstream.stats().recent[0]).toMatchObject({
    route: 'responses',
    stream: true,
    maxTokens: 100,
  });
  expect((await s.settled('support-bot')).billedTokens).toBe(prompt! + 50);
  const events = await s.events((e) => e.some((x) => x.type === 'reservation.settled'));
  expect(events.find((e) => e.type === 'reservation.created')).toMatchObject({ api: 'responses' });
  expect(events.find((e) => e.type === 'reservation.settled')).toMatchObject({
    api: 'responses',
    promptTokens: prompt,
    completionTokens: 50,
  });
});

test('responses.create, streaming: typed events pass through, response.completed carries the usage', async ({
  stack,
}) => {
  const s = await stack();
  const stream = await s.openai(KEYS.support).responses.create({
    model: 'gpt-4o-mini',
    instructions: 'Answer briefly.',
    input: [{ role: 'user', content: [{ type: 'input_text', text: words(10) }] }],
    stream: true,
  });
  const types: string[] = [];
  let text = '';
  let usage: unknown;
  for await (const event of stream) {
    types.push(event.type);
    if (event.type === 'response.output_text.delta') text += event.delta;
    if (event.type === 'response.completed') usage = event.response.usage;
  }
  expect(types[0]).toBe('response.created');
  expect(types.at(-1)).toBe('response.completed');
  expect(text.split(' ')).toHaveLength(50);
  expect(usage).toMatchObject({ output_tokens: 50 });
  const recent = s.upstream.stats().recent[0]!;
  expect(recent.maxTokens).toBe(512);
  expect((await s.settled('support-bot')).billedTokens).toBe(recent.promptTokens + 50);
});

test('max_output_tokens above the use case ceiling is clamped to it, visibly; absent, set to it', async ({
  stack,
}) => {
  const s = await stack();
  const openai = s.openai(KEYS.support);
  const { response } = await openai.responses
    .create({ model: 'gpt-4o-mini', input: words(10), max_output_tokens: 4_096 })
    .withResponse();
  expect(response.headers.get('x-holdfast-max-tokens')).toBe('512; requested=4096; ceiling=512');
  const absent = await openai.responses
    .create({ model: 'gpt-4o-mini', input: words(10) })
    .withResponse();
  expect(absent.response.headers.get('x-holdfast-max-tokens')).toBe(
    '512; requested=none; ceiling=512',
  );
  expect(s.upstream.stats().recent.map((r) => r.maxTokens)).toEqual([512, 512]);
  await s.settled('support-bot');
});

test('previous_response_id: the stored conversation is counted by the upstream input_tokens, exactly as billed', async ({
  stack,
}) => {
  const s = await stack();
  const openai = s.openai(KEYS.support);
  const first = await openai.responses.create({
    model: 'gpt-4o-mini',
    input: words(30),
    max_output_tokens: 40,
  });
  const { data, response } = await openai.responses
    .create({
      model: 'gpt-4o-mini',
      previous_response_id: first.id,
      input: words(5),
      max_output_tokens: 40,
    })
    .withResponse();
  const billed = s.upstream.stats().recent.at(-1)!.promptTokens;
  // The stored turn (30 words in, 40 out) is billed as input again: far more than 5 words.
  expect(billed).toBeGreaterThan(70);
  expect(data.usage?.input_tokens).toBe(billed);
  expect(response.headers.get('x-holdfast-prompt-tokens')).toBe(String(billed));
  expect(s.upstream.stats().requests.responsesInputTokens).toBe(1);
  await s.settled('support-bot');
});

test('state the upstream cannot count: its 400 passes on; no counting endpoint is a clear 400, or the stated allowance', async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      c.upstreams.push({ id: 'dark', baseUrl: 'http://127.0.0.1:9/v1', maxRetries: 0 });
      c.models.push(
        { ...entry(c.models, 'gpt-4o-mini'), id: 'gpt-dark', upstream: 'dark' },
        {
          ...entry(c.models, 'gpt-4o-mini'),
          id: 'gpt-dark-ok',
          upstream: 'dark',
          upstreamStateAllowanceTokens: 5_000,
        },
      );
      const uc = entry(
        entry(c.tenants, 'support-bot').useCases as { id: string; models: string[] }[],
        'UC-101',
      );
      uc.models.push('gpt-dark', 'gpt-dark-ok');
    },
  });
  const openai = s.openai(KEYS.support);
  // A conversation is refused by the edge itself (it cannot tell whose one is).
  const conv = await apiError(
    openai.responses.create({ model: 'gpt-4o-mini', conversation: 'conv_1', input: 'hi' }),
  );
  expect(conv.status).toBe(400);
  expect(conv.message).toContain('conversation');
  // A response of support-bot's own (only its owner may continue one).
  const { id } = await openai.responses.create({ model: 'gpt-4o-mini', input: 'hi' });
  const dark = await apiError(
    openai.responses.create({ model: 'gpt-dark', previous_response_id: id, input: 'hi' }),
  );
  expect(dark.status).toBe(400);
  expect(dark.code).toBe('invalid_request');
  expect(dark.message).toContain('previous_response_id');
  expect(dark.message).toContain('upstreamStateAllowanceTokens');
  expect(s.upstream.stats().requests.responses).toBe(1);
  // With the allowance: admitted on the local count plus 5,000 (the upstream then fails: 502).
  const allowed = await apiError(
    openai.responses.create({ model: 'gpt-dark-ok', previous_response_id: id, input: 'hi' }),
  );
  expect(allowed.status).toBe(502);
  const events = await s.events((e) => e.some((x) => x.type === 'reservation.released'));
  const created = events.filter((e) => e.type === 'reservation.created').at(-1);
  expect(created?.type === 'reservation.created' && created.promptTokens).toBeGreaterThan(5_000);
  expect(created?.type === 'reservation.created' && created.promptTokens).toBeLessThan(5_020);
  await s.settled('support-bot');
});

test('a model on an anthropic upstream is refused on /v1/responses, clearly; background responses too', async ({
  stack,
}) => {
  const s = await stack({ patch: withClaude });
  const openai = s.openai(KEYS.support);
  const err = await apiError(openai.responses.create({ model: CLAUDE, input: 'hi' }));
  expect(err.status).toBe(400);
  expect(err.message).toContain('POST /v1/messages');
  const chat = await apiError(
    openai.chat.completions.create({ model: CLAUDE, messages: [{ role: 'user', content: 'hi' }] }),
  );
  expect(chat.status).toBe(400);
  const bg = await apiError(
    openai.responses.create({ model: 'gpt-4o-mini', input: 'hi', background: true }),
  );
  expect(bg.status).toBe(400);
  expect(bg.message).toContain('background');
  expect(s.upstream.stats().requests.responses + s.upstream.stats().requests.chatCompletions).toBe(
    0,
  );
});
