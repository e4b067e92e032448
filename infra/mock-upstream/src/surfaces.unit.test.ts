import { waitFor } from '@holdfast/testkit';
import { describe, expect, it } from 'vitest';
import { call, useMockUpstream } from '../test/harness.js';

const mock = useMockUpstream();
const ANTHROPIC = { 'anthropic-version': '2023-06-01' };

interface Reply {
  usage: { completion_tokens?: number; output_tokens?: number };
  error: { type: string };
}

/** Each model surface: its route, a body, and where its usage says the output tokens. */
const SURFACES = [
  {
    route: 'chat.completions',
    path: '/v1/chat/completions',
    body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_tokens: 500 },
    headers: {},
    output: (j: Reply) => j.usage.completion_tokens!,
    errorType: (j: Reply) => j.error.type,
    overloaded: 503,
  },
  {
    route: 'responses',
    path: '/v1/responses',
    body: { model: 'gpt-4o-mini', input: 'hi', max_output_tokens: 500 },
    headers: {},
    output: (j: Reply) => j.usage.output_tokens!,
    errorType: (j: Reply) => j.error.type,
    overloaded: 503,
  },
  {
    route: 'messages',
    path: '/v1/messages',
    body: {
      model: 'claude-haiku-4-5',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 500,
    },
    headers: ANTHROPIC,
    output: (j: Reply) => j.usage.output_tokens!,
    errorType: (j: Reply) => j.error.type,
    overloaded: 529,
  },
] as const;

/** Reads a stream until the socket breaks or ends; returns the raw text received. */
async function readStream(
  path: string,
  body: object,
  headers: Record<string, string>,
  signal?: AbortSignal,
) {
  const res = await fetch(`${mock.upstream().url.replace(/\/v1$/, '')}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ ...body, stream: true }),
    signal,
  });
  let text = '';
  const decoder = new TextDecoder();
  try {
    for await (const chunk of res.body!) text += decoder.decode(chunk as Uint8Array);
  } catch {
    // The socket was dropped, or this side aborted.
  }
  return text;
}

describe.each(SURFACES)('the same controls on $route', (s) => {
  const post = (headers: Record<string, string> = {}, body: object = s.body) =>
    call(mock.upstream(), 'POST', s.path, body, { ...s.headers, ...headers });

  it('x-mock-completion-tokens and x-mock-latency-ms', async () => {
    const started = performance.now();
    const res = await post({ 'x-mock-completion-tokens': '7', 'x-mock-latency-ms': '80' });
    expect(performance.now() - started).toBeGreaterThanOrEqual(75);
    expect(s.output(res.json as Reply)).toBe(7);
    expect(mock.upstream().stats().recent[0]).toMatchObject({
      route: s.route,
      completionTokens: 7,
      outcome: 'completed',
    });
  });

  it('x-mock-fail 500, 429 and overloaded in the surface error shape; fail-next too', async () => {
    const failed = await post({ 'x-mock-fail': '500' });
    expect(failed.status).toBe(500);
    const limited = await post({ 'x-mock-fail': '429', 'x-mock-retry-after': '2' });
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('2');
    expect(s.errorType(limited.json as Reply)).toMatch(/^(requests|rate_limit_error)$/);
    mock.upstream().failNext({ status: 'overloaded' });
    expect((await post()).status).toBe(s.overloaded);
    expect((await post()).status).toBe(200);
    const stats = mock.upstream().stats();
    expect(stats.billed.promptTokens).toBe(stats.recent.at(-1)!.promptTokens);
    expect(stats.recent.map((r) => r.outcome)).toEqual([
      'error_500',
      'error_429',
      'error_overloaded',
      'completed',
    ]);
  });

  it('drop after N tokens bills N; a hang ends when the client leaves', async () => {
    await readStream(s.path, s.body, {
      ...s.headers,
      'x-mock-fail': 'drop',
      'x-mock-fail-after-tokens': '3',
    });
    await waitFor(() => mock.upstream().stats().recent.length === 1, { what: 'the drop recorded' });
    expect(mock.upstream().stats().recent[0]).toMatchObject({
      outcome: 'dropped',
      completionTokens: 3,
    });

    const controller = new AbortController();
    const reading = readStream(
      s.path,
      s.body,
      { ...s.headers, 'x-mock-fail': 'hang', 'x-mock-fail-after-tokens': '2' },
      controller.signal,
    );
    await waitFor(() => mock.upstream().stats().inFlight === 1, { what: 'the hang in flight' });
    await new Promise((r) => setTimeout(r, 50));
    controller.abort();
    await reading;
    await waitFor(() => mock.upstream().stats().abortedByClient === 1, { what: 'the abort' });
    expect(mock.upstream().stats().recent[1]).toMatchObject({
      outcome: 'aborted',
      completionTokens: 2,
    });
  });

  it('ignores the cap and over-reports when told to', async () => {
    const res = await post({
      'x-mock-ignore-max-tokens': '600',
      'x-mock-overreport-completion': '10',
    });
    expect(s.output(res.json as Reply)).toBe(610);
    expect(mock.upstream().stats().recent[0]).toMatchObject({
      completionTokens: 610,
      actual: { completionTokens: 600 },
    });
  });
});

describe('GET /_mock/log', () => {
  it('pages the call log by seq', async () => {
    for (const s of SURFACES) await call(mock.upstream(), 'POST', s.path, s.body, s.headers);
    const all = (await call(mock.upstream(), 'GET', '/_mock/log')).json as {
      records: { seq: number; route: string }[];
    };
    expect(all.records.map((r) => r.route)).toEqual(SURFACES.map((s) => s.route));
    const after = (await call(mock.upstream(), 'GET', `/_mock/log?after=${all.records[0]!.seq}`))
      .json as {
      records: unknown[];
    };
    expect(after.records).toHaveLength(2);
    expect((await call(mock.upstream(), 'GET', '/_mock/log?after=x')).status).toBe(400);
  });
});
