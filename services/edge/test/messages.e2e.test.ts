import { expect } from 'vitest';
import { edgeTest as test, entry, KEYS } from './harness.js';
import { anthropic, CLAUDE, clientError, post, withClaude, words } from './surfaces.js';

test('messages.create: counted by the upstream count_tokens, admitted, answered, settled, recorded as messages', async ({
  stack,
}) => {
  const s = await stack({ patch: withClaude });
  const { data, response } = await anthropic(s, KEYS.support)
    .messages.create({
      model: CLAUDE,
      max_tokens: 100,
      system: 'You triage tickets.',
      messages: [{ role: 'user', content: words(20) }],
    })
    .withResponse();
  expect(data.type).toBe('message');
  expect(data.stop_reason).toBe('end_turn');
  const prompt = data.usage.input_tokens;
  expect(response.headers.get('x-holdfast-prompt-tokens')).toBe(String(prompt));
  expect(response.headers.get('x-holdfast-held')).toBe(String(prompt + 100));
  expect(s.upstream.stats().recent.at(-1)).toMatchObject({
    route: 'messages',
    stream: true,
    maxTokens: 100,
  });
  expect((await s.settled('support-bot')).billedTokens).toBe(prompt + 50);
});

test('messages.stream(...).finalMessage() and messages.countTokens work unchanged through the edge', async ({
  stack,
}) => {
  const s = await stack({ patch: withClaude });
  const client = anthropic(s, KEYS.support);
  const params = {
    model: CLAUDE,
    max_tokens: 200,
    system: [{ type: 'text' as const, text: 'You triage tickets.' }],
    messages: [{ role: 'user' as const, content: words(30) }],
  };
  const counted = await client.messages.countTokens(params);
  const stream = client.messages.stream(params);
  let deltas = 0;
  stream.on('text', () => deltas++);
  const message = await stream.finalMessage();
  expect(deltas).toBe(50);
  expect(message.stop_reason).toBe('end_turn');
  expect(message.usage).toMatchObject({ input_tokens: counted.input_tokens, output_tokens: 50 });
  // count_tokens holds and bills nothing; it asked the upstream's own endpoint, once: the call
  // with the same messages was answered by that count (the edge keeps a tenant's counts of a
  // request for a minute).
  expect(s.upstream.stats().requests.messagesCountTokens).toBe(1);
  expect((await s.settled('support-bot')).billedTokens).toBe(counted.input_tokens + 50);
});

test('max_tokens is required (Anthropic 400) and clamped to the use case ceiling; anthropic-version defaults', async ({
  stack,
}) => {
  const s = await stack({ patch: withClaude });
  const auth = { 'x-api-key': KEYS.support };
  const missing = await post(
    s,
    '/v1/messages',
    { model: CLAUDE, messages: [{ role: 'user', content: 'hi' }] },
    auth,
  );
  expect(missing.status).toBe(400);
  expect(missing.body).toMatchObject({
    type: 'error',
    error: {
      type: 'invalid_request_error',
      message: expect.stringMatching(/^invalid_request: .*max_tokens: .*missing/),
    },
  });
  // No anthropic-version from this raw client: the edge sends its own, which the mock requires.
  const r = await post(
    s,
    '/v1/messages',
    { model: CLAUDE, max_tokens: 4_096, messages: [{ role: 'user', content: 'hi' }] },
    auth,
  );
  expect(r.status).toBe(200);
  expect(r.headers.get('x-holdfast-max-tokens')).toBe('512; requested=4096; ceiling=512');
  expect(s.upstream.stats().recent.at(-1)).toMatchObject({ route: 'messages', maxTokens: 512 });
  await s.settled('support-bot');
});

test('the upstream key goes in x-api-key; a Bearer token from the client works as well as x-api-key', async ({
  stack,
}) => {
  const s = await stack({
    upstreamApiKey: 'sk-upstream-claude',
    edge: { env: { CLAUDE_KEY: 'sk-upstream-claude', OPENAI_KEY: 'sk-upstream-claude' } },
    patch: (c) => {
      withClaude(c);
      entry(c.upstreams, 'claude').apiKeyEnv = 'CLAUDE_KEY';
      entry(c.upstreams, 'default').apiKeyEnv = 'OPENAI_KEY';
    },
  });
  const viaHeader = await anthropic(s, KEYS.support).messages.create({
    model: CLAUDE,
    max_tokens: 10,
    messages: [{ role: 'user', content: 'hi' }],
  });
  expect(viaHeader.usage.output_tokens).toBe(10);
  const viaBearer = await anthropic(s, 'unused', {
    apiKey: null,
    authToken: KEYS.support,
  }).messages.create({
    model: CLAUDE,
    max_tokens: 10,
    messages: [{ role: 'user', content: 'hi' }],
  });
  expect(viaBearer.usage.output_tokens).toBe(10);
  expect(s.upstream.stats().completed).toBe(2);
  await s.settled('support-bot');
});

test('thinking.budget_tokens is kept below the granted max_tokens; thinking is billed as output', async ({
  stack,
}) => {
  const s = await stack({
    behaviour: { reasoningTokens: 40 },
    patch: (c) => {
      withClaude(c);
      const uc = entry(c.tenants, 'batch-summariser').useCases as { maxTokens: number }[];
      uc[0]!.maxTokens = 2_048;
    },
  });
  const thinking = { type: 'enabled' as const, budget_tokens: 4_000 };
  // Under the support bot's 512 ceiling no thinking budget fits: refused before admission.
  const small = await clientError(
    anthropic(s, KEYS.support).messages.create({
      model: CLAUDE,
      max_tokens: 8_000,
      thinking,
      messages: [{ role: 'user', content: 'hi' }],
    }),
  );
  expect(small.status).toBe(400);
  expect(small.message).toContain('at most 512');
  const message = await anthropic(s, KEYS.batch).messages.create({
    model: CLAUDE,
    max_tokens: 8_000,
    thinking,
    messages: [{ role: 'user', content: words(10) }],
  });
  // The clamp granted 2,048, so the budget went upstream as 2,047 (the mock refuses >= max).
  expect(message.content[0]?.type).toBe('thinking');
  expect(message.usage.output_tokens).toBe(40 + 50);
  const usage = await s.settled('batch-summariser');
  expect(usage.billedTokens).toBe(message.usage.input_tokens + 90);
  const events = await s.events((e) => e.some((x) => x.type === 'reservation.settled'));
  expect(events.find((e) => e.type === 'reservation.settled')).toMatchObject({
    api: 'messages',
    reasoningTokens: 40,
    completionTokens: 90,
  });
});

test('a model on an openai upstream is refused on /v1/messages in Anthropic shape; count_tokens checks the use case', async ({
  stack,
}) => {
  const s = await stack({ patch: withClaude });
  const err = await clientError(
    anthropic(s, KEYS.support).messages.create({
      model: 'gpt-4o-mini',
      max_tokens: 10,
      messages: [{ role: 'user', content: 'hi' }],
    }),
  );
  expect(err.status).toBe(400);
  expect(err.message).toContain('POST /v1/chat/completions');
  const count = await post(
    s,
    '/v1/messages/count_tokens',
    { model: CLAUDE, messages: [{ role: 'user', content: 'hi' }] },
    { 'x-api-key': KEYS.multi },
  );
  expect(count.status).toBe(403);
  expect(count.body).toMatchObject({ type: 'error', error: { type: 'permission_error' } });
  expect(count.headers.get('x-holdfast-error-code')).toBe('model_not_allowed');
  expect(
    s.upstream.stats().requests.messages + s.upstream.stats().requests.messagesCountTokens,
  ).toBe(0);
});
