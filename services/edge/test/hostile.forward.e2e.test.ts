import { expect, vi } from 'vitest';
import { chatAdapter } from '../src/surfaces/chat/adapter.js';
import { chat, edgeTest as test, entry, KEYS, type Stack, type TestConfig } from './harness.js';

/**
 * Issue 11, "only what the hold paid for can reach the model": each test tries one way a client
 * (or an upstream) could make a call bill more than was admitted, against real NATS and Redis
 * and the mock upstream, whose own log is the truth.
 */

/** A model counted without its own tokenizer, and one a llama-server counts (`upstream`). */
function withModels(c: TestConfig): void {
  c.models.push(
    {
      id: 'mystery-model',
      upstream: 'default',
      tokenizer: 'estimate',
      maxOutputTokens: 4_096,
      price: { inputPerMTok: 1, outputPerMTok: 2 },
    },
    {
      id: 'llama-3-8b-instruct',
      upstream: 'default',
      tokenizer: 'upstream',
      maxOutputTokens: 4_096,
      price: { inputPerMTok: 0.1, outputPerMTok: 0.1 },
    },
    {
      id: 'vision-alias',
      upstream: 'default',
      upstreamModel: 'gpt-4o-mini',
      tokenizer: 'o200k_base',
      price: { inputPerMTok: 0.15, outputPerMTok: 0.6 },
    },
  );
  const models = ['gpt-4o-mini', 'mystery-model', 'llama-3-8b-instruct', 'vision-alias'];
  for (const t of c.tenants) {
    for (const uc of t.useCases as { models: string[] }[]) uc.models = models;
  }
}

async function post(s: Stack, key: string, body: Record<string, unknown>) {
  const res = await fetch(`${s.edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { res, text: await res.text() };
}

const billed = (s: Stack) =>
  s.upstream.stats().recent.reduce((n, r) => n + r.promptTokens + r.completionTokens, 0);

test('vendor length and count fields never reach the model: removed, or set to what was admitted', async ({
  stack,
}) => {
  const s = await stack({
    patch: withModels,
    behaviour: { completion: { mode: 'fixed', tokens: 2_000 } },
  });
  const { res } = await post(s, KEYS.batch, {
    ...chat(10),
    max_tokens: 128,
    n: 2,
    n_predict: 1_500,
    max_new_tokens: 1_500,
    num_predict: 1_500,
    options: { num_predict: 1_500 },
    best_of: 4,
    n_cmpl: 3,
    min_tokens: 1_000,
    ignore_eos: true,
    parameters: { max_new_tokens: 1_500 },
  });
  expect(res.status).toBe(200);
  const dropped = String(res.headers.get('x-holdfast-dropped-fields'));
  for (const f of ['n_predict', 'max_new_tokens', 'options', 'best_of', 'n_cmpl', 'min_tokens']) {
    expect(dropped).toContain(f);
  }
  const [call] = s.upstream.stats().recent;
  expect(call?.vendorFields).toEqual({});
  expect(call?.choices).toBe(2);
  expect(call?.candidates).toBe(2);
  expect(call?.outputCap).toBe(64);
  expect(call!.completionTokens).toBeLessThanOrEqual(128);
  const u = await s.settled('batch-summariser');
  expect(u.windows[0]!.used).toBe(billed(s));
});

test("an upstream's own fields pass only when the upstream lists them, with Ollama's length set", async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      withModels(c);
      entry(c.upstreams, 'default').passThrough = ['top_k', 'options'];
    },
    behaviour: { completion: { mode: 'fixed', tokens: 2_000 } },
  });
  const { res } = await post(s, KEYS.batch, {
    ...chat(10),
    max_tokens: 50,
    top_k: 40,
    repetition_penalty: 1.1,
    options: { num_predict: 1_500, temperature: 0.2 },
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('x-holdfast-dropped-fields')).toBe('repetition_penalty');
  const [call] = s.upstream.stats().recent;
  expect(call?.vendorFields).toEqual({ 'options.num_predict': 50 });
  expect(call!.completionTokens).toBeLessThanOrEqual(50);
});

for (const model of ['gpt-4o-mini', 'mystery-model', 'llama-3-8b-instruct']) {
  test(`an upstream that ignores max_tokens is cut at the admitted output (${model}, streamed and not)`, async ({
    stack,
  }) => {
    // Tokens come 2 ms apart, so the edge's abort reaches the model while it is writing.
    const s = await stack({
      patch: withModels,
      behaviour: { ignoreMaxTokens: 800, tokenDelayMs: 2 },
    });
    const ai = s.openai(KEYS.batch);
    const whole = await ai.chat.completions.create({ ...chat(10), model, max_tokens: 100 });
    expect(whole.choices[0]?.finish_reason).toBe('length');
    let streamed = '';
    let finish: string | null = null;
    const stream = await ai.chat.completions.create({
      ...chat(12),
      model,
      max_tokens: 100,
      stream: true,
    });
    for await (const chunk of stream) {
      streamed += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe('length');
    const u = await s.settled('batch-summariser');
    // The model was stopped well before the 800 tokens it wanted to write.
    const calls = s.upstream.stats().recent;
    expect(calls).toHaveLength(2);
    for (const c of calls) {
      expect(c.outcome).toBe('aborted');
      expect(c.actual.completionTokens).toBeLessThan(400);
    }
    expect(streamed.length).toBeGreaterThan(0);
    // What was billed is what the edge counted (the provider reported nothing: it was cut).
    expect(u.windows[0]!.used).toBeGreaterThan(0);
    expect(u.windows[0]!.held).toBe(0);
  });
}

test('Chinese and emoji prompts, n_predict beside max_tokens, 16 workers: a 20,000-token reserve budget is never exceeded', async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      withModels(c);
      const t = entry(c.tenants, 'finance-ops');
      t.failOpen = false;
      t.budgets = [{ window: 'month', limit: 20_000, unit: 'tokens' }];
      t.useCases = [{ id: 'UC-087', maxTokens: 128, models: ['mystery-model'] }];
    },
    behaviour: { completion: { mode: 'fixed', tokens: 1_500 } },
  });
  const prompt = '预算必须在并发时守住。🎉🚀👩‍👩‍👧‍👦 我们为每个调用保留最坏情况。'.repeat(6);
  let served = 0;
  let refused = 0;
  const worker = async (w: number) => {
    for (let i = 0; i < 12; i++) {
      const extra = (w + i) % 3 === 0 ? { n_predict: 1_500 } : {};
      const { res } = await post(s, KEYS.finance, {
        model: 'mystery-model',
        messages: [{ role: 'user', content: `${w}-${i} ${prompt}` }],
        max_tokens: 128,
        ...extra,
      });
      if (res.status === 200) served++;
      else if (res.status === 429) refused++;
      else throw new Error(`unexpected ${res.status}`);
    }
  };
  await Promise.all(Array.from({ length: 16 }, (_, w) => worker(w)));
  const u = await s.settled('finance-ops');
  const truth = billed(s);
  expect(served).toBeGreaterThan(0);
  expect(refused).toBeGreaterThan(0);
  expect(truth).toBeLessThanOrEqual(20_000);
  expect(u.windows[0]!.used).toBe(truth);
  for (const r of s.upstream.stats().recent) expect(r.completionTokens).toBeLessThanOrEqual(128);
});

test('tokenizer upstream: the prompt is counted with everything the server renders (tools too)', async ({
  stack,
}) => {
  const s = await stack({ patch: withModels });
  const tools = [
    {
      type: 'function' as const,
      function: {
        name: 'lookup_invoice',
        description: 'Finds an invoice by number and returns its lines, totals and due date.',
        parameters: { type: 'object', properties: { number: { type: 'string' } } },
      },
    },
  ];
  const r = await s.openai(KEYS.batch).chat.completions.create({
    ...chat(10),
    model: 'llama-3-8b-instruct',
    max_tokens: 5,
    tools,
  });
  expect(r.usage?.prompt_tokens).toBeGreaterThan(0);
  const [call] = s.upstream.stats().recent;
  const res = await post(s, KEYS.batch, {
    ...chat(10),
    model: 'llama-3-8b-instruct',
    max_tokens: 5,
    tools,
  });
  expect(Number(res.res.headers.get('x-holdfast-prompt-tokens'))).toBe(call!.promptTokens);
});

test('an image is priced for the model the upstream runs, not the alias the client named', async ({
  stack,
}) => {
  const s = await stack({ patch: withModels });
  const body = (model: string) => ({
    model,
    max_tokens: 5,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is on this receipt?' },
          { type: 'image_url', image_url: { url: 'https://example.test/receipt.png' } },
        ],
      },
    ],
  });
  const alias = await post(s, KEYS.multi, body('vision-alias'));
  const direct = await post(s, KEYS.multi, body('gpt-4o-mini'));
  expect(alias.res.status).toBe(200);
  const counted = Number(alias.res.headers.get('x-holdfast-prompt-tokens'));
  // gpt-4o-mini bills an image of unknown size at up to 2,833 + 8 x 5,667 tokens.
  expect(counted).toBeGreaterThan(48_000);
  expect(counted).toBe(Number(direct.res.headers.get('x-holdfast-prompt-tokens')));
});

test('a dropped field whose name is no header text is named in printable form, and the call is served and billed', async ({
  stack,
}) => {
  // Before, a name with CR/LF, NUL or a character past Latin-1 made the header unwritable: a
  // 500 after the upstream had been called, billed (a 500 the SDK retries) or, streamed,
  // released as an upstream error with the provider's work unbilled.
  const s = await stack();
  const names: [string, string][] = [
    ['a\r\nx-evil: 1', 'a??x-evil: 1'],
    ['a\u0000b', 'a?b'],
    ['字段', '??'],
    ['\ud800', '?'],
    ['x'.repeat(70_000), `${'x'.repeat(64)}...`],
  ];
  for (const stream of [false, true]) {
    for (const [name, shown] of names) {
      const { res, text } = await post(s, KEYS.batch, {
        ...chat(10),
        max_tokens: 20,
        stream,
        [name]: 1,
      });
      expect(res.status, text.slice(0, 200)).toBe(200);
      expect(res.headers.get('x-holdfast-dropped-fields')).toBe(shown);
      expect(text).toContain(stream ? '[DONE]' : 'chat.completion');
    }
  }
  expect(s.upstream.stats().recent).toHaveLength(2 * names.length);
  const u = await s.settled('batch-summariser');
  expect(u.windows[0]!.used).toBe(billed(s));
  const events = await s.events(
    (e) => e.filter((x) => x.type === 'reservation.settled').length === 2 * names.length,
  );
  expect(events.filter((e) => e.type === 'reservation.released')).toEqual([]);
});

test('a failure of the edge itself once the upstream has the request bills what the call used, never nothing', async ({
  stack,
}) => {
  // The dropped-fields header above failed after the upstream was called, and a streaming
  // call was released as an upstream error: the model's work unbilled. Any such failure (here
  // the transcript, made once the upstream answered) now settles as a connection lost.
  const s = await stack();
  const transcript = vi.spyOn(chatAdapter, 'transcript').mockImplementation(() => {
    throw new Error('edge fault');
  });
  try {
    for (const stream of [false, true]) {
      const { res } = await post(s, KEYS.batch, { ...chat(10), max_tokens: 20, stream });
      expect(res.status).toBe(500);
    }
  } finally {
    transcript.mockRestore();
  }
  const calls = s.upstream.stats().recent;
  expect(calls).toHaveLength(2);
  const u = await s.settled('batch-summariser');
  // The prompts the upstream read; the edge read no reply.
  expect(u.windows[0]!.used).toBe(calls.reduce((n, c) => n + c.promptTokens, 0));
  const events = await s.events(
    (e) => e.filter((x) => x.type === 'reservation.settled').length === 2,
  );
  expect(events.filter((e) => e.type === 'reservation.released')).toEqual([]);
});
