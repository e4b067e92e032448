import { connect } from 'node:net';
import { expect } from 'vitest';
import { withAdmin } from './admin.js';
import {
  chat,
  edgeTest as test,
  entry,
  KEYS,
  openBodyBytes,
  tenantMetric,
  type Stack,
} from './harness.js';
import { waitFor } from '@holdfast/testkit';

/**
 * Issue 11: an overrun is never silent, and no cheap request can stall the edge. Real NATS and
 * Redis, the mock upstream.
 */

test('a provider that reports more than the hold: the truth is billed, the excess recorded and shown', async ({
  stack,
}) => {
  const s = await stack(
    withAdmin({
      behaviour: { overReport: { promptTokens: 0, completionTokens: 300, factor: 1 } },
      patch: (c) => {
        entry(c.tenants, 'support-bot').budgets = [{ window: 'month', limit: 200, unit: 'tokens' }];
      },
    }),
  );
  const r = await s.openai(KEYS.support).chat.completions.create({ ...chat(10), max_tokens: 50 });
  // The provider says 300 more completion tokens than it wrote, well past the 50 admitted.
  expect(r.usage!.completion_tokens).toBeGreaterThan(300);
  const held = Number(r.usage!.prompt_tokens) + 50;
  const u = await s.settled('support-bot');
  const billed = r.usage!.prompt_tokens + r.usage!.completion_tokens;
  expect(u.windows[0]!.used).toBe(billed);
  expect(u.overruns).toMatchObject({ count: 1, tokens: billed - held });
  const events = await s.events((e) => e.some((x) => x.type === 'reservation.overrun'));
  expect(events.find((e) => e.type === 'reservation.overrun')).toMatchObject({
    tenant: 'support-bot',
    billedTokens: billed,
    overrunTokens: billed - held,
  });
  // The status page marks it.
  const page = await s.edge.app.inject({
    method: 'GET',
    url: '/budgets/bars',
    headers: { authorization: `Bearer ${KEYS.support}` },
  });
  expect(page.body).toContain('1 overrun');
  // The metric counts it.
  const metrics = await s.authority.ctx.metrics.overruns.get();
  expect(metrics.values[0]?.value).toBe(1);
  // The window carries the excess, past its limit: no new hold fits until the window frees it.
  expect(billed).toBeGreaterThan(200);
  const next = await s
    .openai(KEYS.support)
    .chat.completions.create({ ...chat(1), max_tokens: 1 })
    .catch((e: { status?: number; code?: string }) => e);
  expect(next).toMatchObject({ status: 429, code: 'budget_exceeded' });
});

/** A request sent so slowly that it never ends: a byte of body at a time. */
function slowBody(s: Stack, everyMs: number): Promise<{ closedAfterMs: number }> {
  const url = new URL(s.edge.url);
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname, () => {
      socket.write(
        'POST /v1/chat/completions HTTP/1.1\r\nHost: edge\r\n' +
          `Authorization: Bearer ${KEYS.support}\r\nContent-Type: application/json\r\n` +
          'Content-Length: 100000\r\n\r\n{',
      );
      const timer = setInterval(() => socket.write(' '), everyMs);
      socket.on('close', () => {
        clearInterval(timer);
        resolve({ closedAfterMs: Date.now() - started });
      });
    });
    socket.on('error', () => undefined);
    setTimeout(() => reject(new Error('the edge kept the slow request open')), 10_000);
  });
}

test('a body sent a byte at a time cannot hold a socket: the edge closes it at its request timeout', async ({
  stack,
}) => {
  const s = await stack({ edge: { options: { requestTimeoutMs: 1_000 } } });
  const { closedAfterMs } = await slowBody(s, 200);
  expect(closedAfterMs).toBeGreaterThanOrEqual(900);
  expect(closedAfterMs).toBeLessThan(3_000);
  expect(s.upstream.stats().recent).toHaveLength(0);
  expect((await s.edge.app.metrics.slowRequests.get()).values[0]?.value).toBe(1);
  // The edge still serves everyone else.
  const r = await s.openai(KEYS.support).chat.completions.create({ ...chat(5), max_tokens: 3 });
  expect(r.choices).toHaveLength(1);
});

test('a tenant at its cap of calls in flight is refused on its headers: its body is neither parsed nor counted', async ({
  stack,
}) => {
  const s = await stack({
    behaviour: { completion: { mode: 'fixed', tokens: 40 }, tokenDelayMs: 25 },
    patch: (c) => {
      entry(c.tenants, 'support-bot').maxInFlight = 2;
    },
  });
  const ai = s.openai(KEYS.support);
  const running = [0, 1].map(() => ai.chat.completions.create({ ...chat(5), max_tokens: 40 }));
  await new Promise((r) => setTimeout(r, 200));
  const counter = s.edge.app.counter.stats();
  // A prompt of about 200,000 tokens: costly to count, refused without counting.
  const huge = 'word '.repeat(200_000);
  const err = await ai.chat.completions
    .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: huge }], max_tokens: 5 })
    .catch((e: { status?: number; code?: string }) => e);
  expect(err).toMatchObject({ status: 429, code: 'concurrency_limit' });
  expect(s.edge.app.counter.stats()).toEqual(counter);
  // A body that is not JSON gets the same 429, not a 400: it was never parsed. Every POST of
  // the model APIs counts, count_tokens too.
  const notJson = (path: string) =>
    fetch(`${s.edge.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEYS.support}`, 'content-type': 'application/json' },
      body: '{"model": "gpt-4o-mini", "messages": [',
    }).then(async (r) => {
      await r.arrayBuffer();
      return { status: r.status, code: r.headers.get('x-holdfast-error-code') };
    });
  expect(await notJson('/v1/chat/completions')).toEqual({ status: 429, code: 'concurrency_limit' });
  expect(await notJson('/v1/messages/count_tokens')).toEqual({
    status: 429,
    code: 'concurrency_limit',
  });
  await Promise.all(running);
  // With the calls ended, the same body is parsed and refused for what it is.
  expect(await notJson('/v1/chat/completions')).toEqual({ status: 400, code: 'invalid_request' });
});

test("a prompt counted above its model's maxPromptTokens is a 400 on every surface, nothing held or sent, a long-context price or not; at the cap it goes on", async ({
  stack,
}) => {
  const CAP = 400;
  const s = await stack({
    patch: (c) => {
      for (const m of c.models) m.maxPromptTokens = CAP;
      // The cap is independent of price.longContext: a model that prices long context above
      // 100 tokens is still capped at 400.
      const mini = c.models.find((m) => m.id === 'gpt-4o-mini')!;
      const price = mini.price as { inputPerMTok: number; outputPerMTok: number };
      mini.price = {
        ...price,
        longContext: {
          aboveInputTokens: 100,
          inputPerMTok: price.inputPerMTok * 2,
          outputPerMTok: price.outputPerMTok * 1.5,
        },
      };
    },
  });
  const words = (n: number) => 'word '.repeat(n);
  const over = await s.edge.app.inject({
    method: 'POST',
    url: '/v1/chat/completions',
    headers: { authorization: `Bearer ${KEYS.support}` },
    payload: {
      model: 'gpt-4o-mini',
      max_tokens: 10,
      messages: [{ role: 'user', content: words(600) }],
    },
  });
  expect(over.statusCode).toBe(400);
  expect(over.json().error).toMatchObject({ code: 'invalid_request', param: 'model' });
  expect(over.json().error.message).toContain('maxPromptTokens');
  const responses = await s.edge.app.inject({
    method: 'POST',
    url: '/v1/responses',
    headers: { authorization: `Bearer ${KEYS.support}` },
    payload: { model: 'gpt-4o-mini', max_output_tokens: 16, input: words(600) },
  });
  expect(responses.statusCode).toBe(400);
  const u = await s.settled('support-bot');
  expect(u.windows[0]).toMatchObject({ used: 0, held: 0 });
  expect(s.upstream.stats().recent).toHaveLength(0);
  // Under the cap: admitted, billed as ever.
  const r = await s.openai(KEYS.support).chat.completions.create({
    model: 'gpt-4o-mini',
    max_tokens: 10,
    messages: [{ role: 'user', content: words(300) }],
  });
  expect(r.usage!.prompt_tokens).toBeLessThanOrEqual(CAP);
  expect((await s.settled('support-bot')).windows[0]!.used).toBe(r.usage!.total_tokens);
});

/**
 * Opens a request whose headers declare `length` bytes of body, sends a byte of it, and keeps
 * it open; resolves the status the edge answered, or 'open' when it is still reading.
 */
function openBody(
  s: Stack,
  key: string,
  length: number | 'chunked',
): Promise<{ status: number | 'open'; close: () => void }> {
  const url = new URL(s.edge.url);
  return new Promise((resolve) => {
    const socket = connect(Number(url.port), url.hostname, () => {
      const framing =
        length === 'chunked'
          ? 'Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n'
          : `Content-Length: ${length}\r\n\r\n{`;
      socket.write(
        'POST /v1/chat/completions HTTP/1.1\r\nHost: edge\r\n' +
          `Authorization: Bearer ${key}\r\nContent-Type: application/json\r\n${framing}`,
      );
      const still = setTimeout(() => resolve({ status: 'open', close }), 300);
      socket.once('data', (chunk) => {
        clearTimeout(still);
        resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(chunk.toString())?.[1]), close });
      });
    });
    const close = () => socket.destroy();
    socket.on('error', () => undefined);
  });
}

test("a tenant without maxInFlight cannot run the edge out of memory: its open bodies are bounded by bytes on their headers, and every tenant's", async ({
  stack,
}) => {
  const MiB = 1_048_576;
  const s = await stack({
    edge: {
      options: {
        bodyLimitBytes: 10 * MiB,
        openBodies: { tenantBodyBytes: 25 * MiB, bodyBytes: 35 * MiB },
      },
    },
  });
  // support-bot has no maxInFlight. Two 10 MiB bodies open, arriving slowly: the edge reads them.
  const first = [
    await openBody(s, KEYS.support, 10 * MiB),
    await openBody(s, KEYS.support, 10 * MiB),
  ];
  expect(first.map((o) => o.status)).toEqual(['open', 'open']);
  // A third would take its open bodies to 30 MiB: refused on its headers, and so is a body
  // that declares no length (taken at the body limit).
  const third = await openBody(s, KEYS.support, 10 * MiB);
  expect(third.status).toBe(429);
  expect((await openBody(s, KEYS.support, 'chunked')).status).toBe(429);
  // A small call of the same tenant still fits under its bound; another tenant is served.
  const ok = await s.openai(KEYS.support).chat.completions.create({ ...chat(5), max_tokens: 3 });
  expect(ok.choices).toHaveLength(1);
  const other = [await openBody(s, KEYS.batch, 10 * MiB)];
  expect(other[0]!.status).toBe('open');
  // 30 MiB open on the edge: the next 10 MiB of any tenant would pass its 35.
  const refused = await fetch(`${s.edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${KEYS.batch}`,
      'content-type': 'application/json',
      'content-length': String(10 * MiB),
    },
    body: 'x'.repeat(10 * MiB),
  }).then(async (r) => ({
    status: r.status,
    body: (await r.json()) as { error: { message: string } },
  }));
  expect(refused.status).toBe(429);
  expect(refused.body.error.message).toContain('This edge already has requests with 35 MiB');
  expect((await s.edge.app.metrics.earlyRefusals.get()).values[0]).toMatchObject({
    labels: { code: 'concurrency_limit' },
    value: 3,
  });
  expect(await openBodyBytes(s)).toBe(30 * MiB);
  // Nothing was parsed, held or sent for any of them.
  expect(s.upstream.stats().recent).toHaveLength(1);
  // Once the open bodies close, their bytes are free again.
  for (const o of [...first, ...other]) o.close();
  await expect.poll(() => openBodyBytes(s), { timeout: 15_000, interval: 500 }).toBe(0);
  const again = await openBody(s, KEYS.support, 10 * MiB);
  expect(again.status).toBe('open');
  again.close();
  third.close();
});

test("one tenant's long streams cannot take every connection to an upstream: past its share its calls are refused, nothing sent or held, and another tenant's call goes straight through", async ({
  stack,
}) => {
  const s = await stack({
    // A pool of 8 connections to the mock, 4 of them at most for one tenant.
    edge: { options: { upstream: { connections: 8, tenantShare: 0.5 } } },
    behaviour: { completion: { mode: 'fixed', tokens: 60 }, tokenDelayMs: 50 },
    patch: (c) => {
      entry(c.tenants, 'support-bot').budgets = [
        { window: 'month', limit: 1_000_000, unit: 'tokens' },
      ];
    },
  });
  // The client does not retry its 429s: each refusal is one call.
  const a = s.openai(KEYS.support, { maxRetries: 0 });
  // support-bot has no maxInFlight: 10 streams of 3 s each.
  const streams = Array.from({ length: 10 }, () =>
    a.chat.completions
      .create({ ...chat(5), max_tokens: 60, stream: true })
      .then(async (stream) => {
        let tokens = 0;
        for await (const chunk of stream) tokens += chunk.choices[0]?.delta.content ? 1 : 0;
        return tokens;
      })
      .catch((e: { status?: number; code?: string; message?: string }) => e),
  );
  await waitFor(() => s.upstream.stats().inFlight >= 4 || undefined, {
    what: "4 of A's streams upstream",
  });
  // Another tenant's short call gets a connection at once (before, it waited in the pool's
  // queue behind A's calls, for as long as A's streams ran).
  const started = performance.now();
  const b = await s.openai(KEYS.finance).chat.completions.create({ ...chat(5), max_tokens: 3 });
  const bMs = performance.now() - started;
  expect(b.choices).toHaveLength(1);
  expect(bMs).toBeLessThan(2_000);
  const ended = await Promise.all(streams);
  const served = ended.filter((x) => typeof x === 'number');
  const refused = ended.filter((x) => typeof x !== 'number');
  expect(served.length).toBeGreaterThanOrEqual(4);
  for (const e of refused) {
    expect(e).toMatchObject({ status: 429, code: 'concurrency_limit' });
    expect((e as { message: string }).message).toContain('calls open to upstream');
  }
  // The upstream saw only what was served (A's and B's), and each refused call's hold was
  // released: billed what was served, nothing held.
  expect(s.upstream.stats().recent).toHaveLength(served.length + 1);
  expect(await tenantMetric(s, 'edge_upstream_share_refusals_total', 'support-bot')).toBe(
    refused.length,
  );
  const u = await s.settled('support-bot');
  expect(u.windows[0]).toMatchObject({ held: 0 });
  expect(u.windows[0]!.used).toBeGreaterThan(0);
});

test("a call past its tenant's share of one upstream goes to its fallback on another origin at once, without retrying the first", async ({
  stack,
}) => {
  const s = await stack({
    edge: { options: { upstream: { connections: 2, tenantShare: 0.5 } } },
    behaviour: { completion: { mode: 'fixed', tokens: 20 }, tokenDelayMs: 50 },
    patch: (c) => {
      // The same mock under another name: another origin, so another pool.
      const backup = entry(c.upstreams, 'backup');
      backup.baseUrl = String(backup.baseUrl).replace('127.0.0.1', 'localhost');
      entry(c.models, 'gpt-4o-mini').fallbackUpstreams = ['backup'];
    },
  });
  const a = s.openai(KEYS.support, { maxRetries: 0 });
  const first = a.chat.completions.create({ ...chat(5), max_tokens: 20, stream: true });
  const firstDone = first.then(async (stream) => {
    for await (const chunk of stream) void chunk;
  });
  await waitFor(() => s.upstream.stats().inFlight >= 1 || undefined, {
    what: 'the first call upstream',
  });
  // The default upstream's share (1 connection) is taken: the second call is served by the backup.
  const second = await a.chat.completions.create({ ...chat(5), max_tokens: 20 });
  expect(second.choices).toHaveLength(1);
  await firstDone;
  expect(await tenantMetric(s, 'edge_upstream_share_refusals_total', 'support-bot')).toBe(1);
  expect(s.upstream.stats().recent).toHaveLength(2);
  const u = await s.settled('support-bot');
  expect(u.windows[0]).toMatchObject({ held: 0 });
});
