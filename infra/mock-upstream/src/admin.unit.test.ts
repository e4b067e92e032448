import { describe, expect, it } from 'vitest';
import { call, useMockUpstream } from '../test/harness.js';
import { startMockUpstream } from './server.js';

const mock = useMockUpstream();
const body = { model: 'gpt-4o', messages: [{ role: 'user' as const, content: 'hi' }] };

describe('/_mock admin API', () => {
  it('changes behaviour at runtime and reset restores the startup behaviour', async () => {
    const put = await call(mock.upstream(), 'PUT', '/_mock/config', {
      completion: { mode: 'fixed', tokens: 3 },
    });
    expect(put.status).toBe(200);
    expect(put.json).toMatchObject({ completion: { mode: 'fixed', tokens: 3 } });
    const res = await mock.client().chat.completions.create(body);
    expect(res.usage!.completion_tokens).toBe(3);

    expect((await call(mock.upstream(), 'PUT', '/_mock/config', { tokenDelayMs: -1 })).status).toBe(
      400,
    );
    expect((await call(mock.upstream(), 'PUT', '/_mock/config', { nope: 1 })).status).toBe(400);

    expect((await call(mock.upstream(), 'POST', '/_mock/reset')).status).toBe(204);
    expect((await call(mock.upstream(), 'GET', '/_mock/config')).json).toMatchObject({
      completion: { mode: 'fixed', tokens: 50 },
    });
    expect(mock.upstream().stats().requests.chatCompletions).toBe(0);
  });

  it('serves stats as JSON with requests by route and summed usage', async () => {
    await mock.client().chat.completions.create(body);
    await mock.client().embeddings.create({ model: 'text-embedding-3-small', input: 'hello' });
    await mock.client().models.list();
    const { json } = await call(mock.upstream(), 'GET', '/_mock/stats');
    expect(json).toMatchObject({
      requests: { chatCompletions: 1, embeddings: 1, models: 1 },
      completed: 2,
      usage: { completionTokens: 50 },
    });
  });

  it('rejects a malformed fail-next', async () => {
    const res = await call(mock.upstream(), 'POST', '/_mock/fail-next', { status: 503 });
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ error: { type: 'invalid_request_error' } });
  });

  it('exposes /healthz, /readyz and /metrics', async () => {
    await mock.client().chat.completions.create(body);
    expect((await call(mock.upstream(), 'GET', '/healthz')).json).toEqual({ ok: true });
    expect((await call(mock.upstream(), 'GET', '/readyz')).status).toBe(200);
    const metrics = await call(mock.upstream(), 'GET', '/metrics');
    expect(metrics.text).toMatch(/mock_upstream_requests_total\{[^}]*outcome="completed"[^}]*\} 1/);
  });
});

describe('bearer check', () => {
  it('answers 401 without the configured key', async () => {
    const upstream = await startMockUpstream({ port: 0, apiKey: 'sk-mock' });
    try {
      const res = await fetch(`${upstream.url}/models`);
      expect(res.status).toBe(401);
      expect(await res.json()).toMatchObject({ error: { code: 'invalid_api_key' } });
      const ok = await fetch(`${upstream.url}/models`, {
        headers: { authorization: 'Bearer sk-mock' },
      });
      expect(ok.status).toBe(200);
    } finally {
      await upstream.stop();
    }
  });
});
