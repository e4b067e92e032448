import { Err, RpcError } from '@holdfast/runtime';
import { afterEach, describe, expect, test } from 'vitest';
import { KEY, unitCall, type UnitCall } from '../../test/call-deps.js';

/**
 * The surface-agnostic core with explicit dependencies (call/deps.ts): an in-memory authority,
 * a real upstream client and token counter against the mock upstream, no edge plugins. What
 * it asks the authority, what it sends upstream, what it settles, on each path.
 */
let u: UnitCall | undefined;
afterEach(async () => {
  await u?.close();
  u = undefined;
});

const auth = { authorization: `Bearer ${KEY}` };
const words = (n: number) =>
  Array.from({ length: n }, (_, i) => (i % 2 ? 'budget' : 'report')).join(' ');
const chat = (extra: object = {}) => ({
  model: 'gpt-4o-mini',
  messages: [{ role: 'user', content: words(20) }],
  ...extra,
});

async function settledOnce(x: UnitCall) {
  // Closes run in the background: wait for the one this call made.
  for (let i = 0; i < 200 && x.authority.settles.length + x.authority.releases.length === 0; i++) {
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Posts a chat call with the test key. */
function postChat(x: Awaited<ReturnType<typeof unitCall>>, payload: object = chat()) {
  return x.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: auth, payload });
}

/** Posts a chat call; the client must get 403 tenant_suspended. */
async function expectSuspended(x: Awaited<ReturnType<typeof unitCall>>): Promise<void> {
  const res = await postChat(x);
  expect(res.statusCode).toBe(403);
  expect(res.json()).toMatchObject({ error: { code: 'tenant_suspended' } });
}

describe('runCall', () => {
  test('a team suspended while its prompt is being counted: the client gets tenant_suspended, nothing is admitted or sent upstream', async () => {
    const x = (u = await unitCall());
    const count = x.deps.counter.countChat.bind(x.deps.counter);
    x.deps.counter.countChat = (...args) => {
      x.deps.calls.suspend('team', 0);
      return count(...args);
    };
    await expectSuspended(x);
    expect(x.authority.admits).toEqual([]);
    expect(x.upstream.stats().recent).toHaveLength(0);
  });

  test('a team suspended while its call is being admitted: the client gets tenant_suspended, never silence; nothing reaches the model', async () => {
    const x = (u = await unitCall());
    const admit = x.authority.admit.bind(x.authority);
    // The suspension notice arrives while the admission is on its way.
    x.authority.admit = (req) => {
      x.deps.calls.suspend('team', 0);
      return admit(req);
    };
    await expectSuspended(x);
    await settledOnce(x);
    expect(x.authority.releases).toEqual([expect.objectContaining({ reason: 'not_forwarded' })]);
    expect(x.upstream.stats().recent).toHaveLength(0);
    expect(x.authority.held).toBe(0);
  });

  test('counts, clamps and admits with the surface, forwards the grant, settles what the provider reported', async () => {
    u = await unitCall();
    const res = await postChat(u, chat({ max_tokens: 4_096 }));
    expect(res.statusCode).toBe(200);
    await settledOnce(u);
    expect(u.authority.admits).toEqual([
      expect.objectContaining({
        tenant: 'team',
        useCase: 'uc',
        api: 'chat',
        promptTokens: 27,
        maxTokens: 256,
        extensible: true,
      }),
    ]);
    expect(u.upstream.stats().recent[0]).toMatchObject({ maxTokens: 256, stream: true });
    expect(u.authority.settles[0]).toMatchObject({
      usage: { promptTokens: 27, completionTokens: 50 },
      outcome: 'completed',
    });
    expect(u.authority.held).toBe(0);
  });

  test("a refusal is answered in the surface's own shape and nothing reaches the model", async () => {
    u = await unitCall({ limit: 100 });
    const openai = await u.app.inject({
      method: 'POST',
      url: '/v1/responses',
      headers: auth,
      payload: { model: 'gpt-4o-mini', input: 'hi' },
    });
    expect(openai.statusCode).toBe(429);
    expect(openai.headers['retry-after']).toBe('30');
    expect(openai.json()).toMatchObject({ error: { code: 'budget_exceeded' } });
    const anthropic = await u.app.inject({
      method: 'POST',
      url: '/v1/messages',
      headers: auth,
      payload: { model: 'claude-x', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(anthropic.statusCode).toBe(429);
    expect(anthropic.json()).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
    expect(u.upstream.stats().recent).toEqual([]);
    expect(u.authority.admits.map((a) => a.api)).toEqual(['responses', 'messages']);
  });

  test('an admit without a definitive answer (internal, malformed reply, timeout, store down) is released; no_responders needs none', async () => {
    u = await unitCall();
    const x = u;
    const cases = [
      ['internal', 500],
      ['timeout', 503],
      ['budget_store_unavailable', 503],
      ['no_responders', 503],
    ] as const;
    for (const [code, status] of cases) {
      x.authority.admit = () =>
        Promise.resolve(Err(new RpcError({ code, message: `the authority said ${code}` })));
      const res = await postChat(x);
      expect(res.statusCode, code).toBe(status);
    }
    // The releases run in the background: one per admit that may have made a hold.
    for (let i = 0; i < 200 && x.authority.releases.length < 3; i++) {
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(x.authority.releases.map((r) => r.reason)).toEqual([
      'admit_abandoned',
      'admit_abandoned',
      'admit_abandoned',
    ]);
    expect(x.upstream.stats().recent).toEqual([]);
  });

  test('a model served on another API is refused before counting or admission', async () => {
    u = await unitCall();
    const res = await postChat(u, chat({ model: 'claude-x' }));
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toContain('POST /v1/messages');
    expect(u.authority.admits).toEqual([]);
    expect(u.upstream.stats().requests.messagesCountTokens).toBe(0);
  });

  test('a count the surface cannot make ends the call before admission', async () => {
    u = await unitCall();
    const res = await u.app.inject({
      method: 'POST',
      url: '/v1/responses',
      headers: auth,
      payload: { model: 'gpt-dark', previous_response_id: 'resp_1', input: 'hi' },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.param).toBe('previous_response_id');
    expect(u.authority.admits).toEqual([]);
  });

  test('an upstream that writes past the admitted output is cut there and settles no more than its hold', async () => {
    u = await unitCall({ mock: { ignoreMaxTokens: 500 } });
    const res = await postChat(u, chat({ max_tokens: 40 }));
    expect(res.json()).toMatchObject({ choices: [{ finish_reason: 'length' }] });
    expect(res.headers['x-holdfast-ended']).toBe('output_limit');
    await settledOnce(u);
    const { usage } = u.authority.settles[0]!;
    expect(usage.completionTokens).toBeGreaterThanOrEqual(40);
    expect(usage.completionTokens).toBeLessThanOrEqual(41);
  });

  test('an upstream that never answers 2xx: retried, then the hold is released and nothing billed', async () => {
    u = await unitCall();
    u.upstream.failNext({ status: 500, count: 3 });
    const res = await postChat(u);
    expect(res.statusCode).toBe(502);
    await settledOnce(u);
    expect(u.authority.releases).toEqual([expect.objectContaining({ reason: 'upstream_error' })]);
    expect(u.authority.settles).toEqual([]);
    expect(u.upstream.stats().errorsInjected['500']).toBe(3);
  });

  test("a stream cut before the provider's final usage bills the input it reported first (cache writes included)", async () => {
    u = await unitCall({ mock: { ignoreMaxTokens: 300, promptCacheMinTokens: 5 } });
    const res = await u.app.inject({
      method: 'POST',
      url: '/v1/messages',
      headers: auth,
      payload: {
        model: 'claude-x',
        max_tokens: 30,
        stream: true,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: words(40), cache_control: { type: 'ephemeral', ttl: '1h' } },
            ],
          },
        ],
      },
    });
    expect(res.body).toContain('"stop_reason":"max_tokens"');
    await settledOnce(u);
    const billed = u.upstream.stats().recent[0]!;
    expect(billed.cacheWrite1hTokens).toBeGreaterThan(0);
    const usage = u.authority.settles[0]!.usage;
    expect(usage).toMatchObject({
      promptTokens: billed.promptTokens,
      cacheWrite1hTokens: billed.cacheWrite1hTokens,
    });
    // The delta that crossed the limit was passed on, and so is billed.
    expect([30, 31]).toContain(usage.completionTokens);
  });
});
