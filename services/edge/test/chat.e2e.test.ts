import { expect } from 'vitest';
import { chat, edgeTest as test, entry, KEYS } from './harness.js';

test('a non-streaming call through the official client is admitted, answered, settled to its usage', async ({
  stack,
}) => {
  const s = await stack();
  const openai = s.openai(KEYS.support);
  const { data, response } = await openai.chat.completions
    .create(chat(20, { max_tokens: 100 }))
    .withResponse();
  expect(data.object).toBe('chat.completion');
  expect(data.choices[0]?.message.content).toBeTruthy();
  expect(data.choices[0]?.finish_reason).toBe('stop');
  expect(data.usage).toMatchObject({ prompt_tokens: 27, completion_tokens: 50 });

  const h = response.headers;
  expect(h.get('x-holdfast-reservation-id')).toMatch(/^[0-9a-f-]{36}$/);
  expect(h.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  expect(h.get('x-holdfast-prompt-tokens')).toBe('27');
  expect(h.get('x-holdfast-held')).toBe(String(27 + 100));
  expect(h.get('x-holdfast-max-tokens')).toBe('100; requested=100; ceiling=512');
  expect(h.get('x-holdfast-remaining-month-tokens')).toBe(String(60_000 - 127));
  expect(h.get('ratelimit-policy')).toContain('"month-tokens";q=60000;w=2592000;qu="tokens"');
  expect(h.get('ratelimit-policy')).toContain('"day-usd";q=5000000;w=86400;qu="microusd"');
  expect(h.get('ratelimit')).toContain(`"month-tokens";r=${60_000 - 127}`);

  // The upstream was asked to stream, with usage, and the granted max.
  const seen = s.upstream.stats().recent[0]!;
  expect(seen).toMatchObject({ stream: true, includeUsage: true, maxTokens: 100 });

  const usage = await s.settled('support-bot');
  expect(usage.billedTokens).toBe(77);
  const events = await s.events((e) => e.some((x) => x.type === 'reservation.settled'));
  expect(events.find((e) => e.type === 'reservation.settled')).toMatchObject({
    reservationId: h.get('x-holdfast-reservation-id'),
    keyId: 'support-1',
    useCase: 'UC-101',
    promptTokens: 27,
    completionTokens: 50,
    outcome: 'completed',
  });
});

test('a streaming call passes chunks through and settles the provider usage', async ({ stack }) => {
  const s = await stack();
  const stream = await s.openai(KEYS.support).chat.completions.create({
    ...chat(20),
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage: unknown;
  let finish: string | null | undefined;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta.content ?? '';
    finish ??= chunk.choices[0]?.finish_reason;
    if (chunk.usage) usage = chunk.usage;
  }
  expect(text.split(' ')).toHaveLength(50);
  expect(finish).toBe('stop');
  expect(usage).toMatchObject({ prompt_tokens: 27, completion_tokens: 50 });
  expect((await s.settled('support-bot')).billedTokens).toBe(77);
});

test('a streaming client that did not ask for usage gets no usage chunk', async ({ stack }) => {
  const s = await stack();
  const stream = await s.openai(KEYS.support).chat.completions.create({ ...chat(5), stream: true });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  expect(chunks.every((c) => c.choices.length > 0)).toBe(true);
  // The edge still asked upstream for usage, and billed it.
  expect(s.upstream.stats().recent[0]).toMatchObject({ includeUsage: true });
  expect((await s.settled('support-bot')).billedTokens).toBe(12 + 50);
});

test('max_tokens 4096 is clamped to the use case ceiling of 512, visibly', async ({ stack }) => {
  const s = await stack();
  const { response } = await s
    .openai(KEYS.support)
    .chat.completions.create(chat(10, { max_tokens: 4_096 }))
    .withResponse();
  expect(response.headers.get('x-holdfast-max-tokens')).toBe('512; requested=4096; ceiling=512');
  expect(response.headers.get('x-holdfast-held')).toBe(String(17 + 512));
  expect(s.upstream.stats().recent[0]?.maxTokens).toBe(512);

  // max_completion_tokens is clamped the same way and sent under its own name.
  await s.openai(KEYS.support).chat.completions.create(chat(10, { max_completion_tokens: 9_999 }));
  expect(s.upstream.stats().recent[1]?.maxTokens).toBe(512);
  // Absent: set to the ceiling.
  const { response: r3 } = await s
    .openai(KEYS.support)
    .chat.completions.create(chat(10))
    .withResponse();
  expect(r3.headers.get('x-holdfast-max-tokens')).toBe('512; requested=none; ceiling=512');
  expect(s.upstream.stats().recent[2]?.maxTokens).toBe(512);
  await s.settled('support-bot');
});

test('shrink to fit: a call that does not fit is admitted with a lower max_tokens, visibly', async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      const batch = entry(c.tenants, 'batch-summariser');
      batch.budgets = [{ window: 'month', limit: 1_100 }];
      batch.shrinkToFit = { minOutputTokens: 100 };
    },
  });
  await s.openai(KEYS.batch).chat.completions.create(chat(20));
  await s.settled('batch-summariser');
  // 1,100 - 77 billed = 1,023 left; the prompt takes 27, so 996 output tokens fit.
  const { response } = await s.openai(KEYS.batch).chat.completions.create(chat(20)).withResponse();
  expect(response.headers.get('x-holdfast-shrink-to-fit')).toBe('996; from=1024');
  expect(response.headers.get('x-holdfast-max-tokens')).toBe('996; requested=none; ceiling=1024');
  expect(s.upstream.stats().recent[1]?.maxTokens).toBe(996);
  await s.settled('batch-summariser');
});

test('a long prompt is counted in the worker pool, exactly', async ({ stack }) => {
  const s = await stack();
  const { data, response } = await s
    .openai(KEYS.support)
    .chat.completions.create(chat(12_000, { max_tokens: 10 }))
    .withResponse();
  expect(s.edge.app.counter.stats().pooled).toBe(1);
  expect(response.headers.get('x-holdfast-prompt-tokens')).toBe(String(data.usage?.prompt_tokens));
  expect(data.usage?.prompt_tokens).toBe(12_007);
  await s.settled('support-bot');
});

test('the use case comes from x-use-case, else the key default, else the only one', async ({
  stack,
}) => {
  const s = await stack();
  const multi = s.openai(KEYS.multi);
  const byDefault = await multi.chat.completions.create(chat(5)).withResponse();
  expect(byDefault.response.headers.get('x-holdfast-max-tokens')).toContain('ceiling=128');
  const byHeader = await multi.chat.completions
    .create(chat(5), { headers: { 'x-use-case': 'UC-1' } })
    .withResponse();
  expect(byHeader.response.headers.get('x-holdfast-max-tokens')).toContain('ceiling=256');
  await s.settled('multi');
});

test('embeddings are admitted on their input tokens and settled to the reported usage', async ({
  stack,
}) => {
  const s = await stack();
  const { data, response } = await s
    .openai(KEYS.support)
    .embeddings.create({ model: 'text-embedding-3-small', input: ['hello world', 'budget report'] })
    .withResponse();
  expect(data.data).toHaveLength(2);
  expect(data.usage.prompt_tokens).toBe(4);
  expect(response.headers.get('x-holdfast-prompt-tokens')).toBe('4');
  expect((await s.settled('support-bot')).billedTokens).toBe(4);
});

test('GET /v1/models lists the configured models', async ({ stack }) => {
  const s = await stack();
  const ids = [];
  for await (const m of s.openai(KEYS.support).models.list()) ids.push(m.id);
  expect(ids).toEqual(['gpt-4o-mini', 'text-embedding-3-small']);
  const one = await s.openai(KEYS.support).models.retrieve('gpt-4o-mini');
  expect(one.id).toBe('gpt-4o-mini');
});

test('/healthz, /readyz and /metrics answer on the edge port', async ({ stack }) => {
  const s = await stack();
  await s.openai(KEYS.support).chat.completions.create(chat(5));
  expect((await fetch(`${s.edge.url}/healthz`)).status).toBe(200);
  expect(await (await fetch(`${s.edge.url}/readyz`)).json()).toEqual({
    ok: true,
    checks: { config: true },
  });
  const metrics = await (await fetch(`${s.edge.url}/metrics`)).text();
  expect(metrics).toContain(
    'edge_http_requests_total{route="/v1/chat/completions",status="200",code="",service="edge"} 1',
  );
  expect(metrics).toMatch(/edge_admission_seconds_count\{service="edge",outcome="admitted"\} 1/);
  expect(metrics).toMatch(
    /edge_upstream_first_byte_seconds_count\{service="edge",upstream="default",outcome="200"\} 1/,
  );
  expect(metrics).toMatch(
    /edge_upstream_duration_seconds_count\{service="edge",upstream="default",outcome="ok"\} 1/,
  );
  expect(metrics).toMatch(
    /edge_tokens_total\{kind="prompt",model="gpt-4o-mini",api="chat",service="edge"\} 12/,
  );
});
