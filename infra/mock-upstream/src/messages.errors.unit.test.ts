import { RateLimitError } from '@anthropic-ai/sdk';
import { waitFor } from '@holdfast/testkit';
import { describe, expect, it } from 'vitest';
import { anthropicClient, call, useMockUpstream } from '../test/harness.js';
import { startMockUpstream } from './server.js';

const mock = useMockUpstream();
const claude = () => anthropicClient(mock.upstream());
const base = {
  model: 'claude-sonnet-4-5',
  max_tokens: 200,
  messages: [{ role: 'user' as const, content: 'Write the weekly budget digest.' }],
};

describe('Anthropic errors and faults', () => {
  it('answers 429 rate_limit_error with retry-after, 529 overloaded_error, 500 api_error', async () => {
    const client = claude();
    const limited = await client.messages
      .create(base, { headers: { 'x-mock-fail': '429', 'x-mock-retry-after': '3' } })
      .catch((e: unknown) => e);
    expect(limited).toBeInstanceOf(RateLimitError);
    expect((limited as RateLimitError).headers?.get('retry-after')).toBe('3');
    expect((limited as RateLimitError).error).toMatchObject({
      type: 'error',
      error: { type: 'rate_limit_error' },
    });
    mock.upstream().failNext({ status: 529 });
    const overloaded = await client.messages.create(base).catch((e: unknown) => e);
    expect(overloaded).toMatchObject({
      status: 529,
      error: { error: { type: 'overloaded_error' } },
    });
    const failed = await client.messages
      .create(base, { headers: { 'x-mock-fail': '500' } })
      .catch((e: unknown) => e);
    expect(failed).toMatchObject({ status: 500, error: { error: { type: 'api_error' } } });
    expect(mock.upstream().stats().errorsInjected).toMatchObject({
      '429': 1,
      overloaded: 1,
      '500': 1,
    });
  });

  it('answers a full account with Anthropic rate-limit headers', async () => {
    mock.upstream().configure({ capacity: { requestsPerMinute: 1 } });
    const client = claude();
    await client.messages.create(base);
    const err = (await client.messages.create(base).catch((e: unknown) => e)) as RateLimitError;
    expect(err.status).toBe(429);
    expect(err.headers?.get('anthropic-ratelimit-requests-remaining')).toBe('0');
    expect(err.headers?.get('anthropic-ratelimit-requests-reset')).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(Number(err.headers?.get('retry-after'))).toBeGreaterThan(0);
  });

  it('breaks a stream with an error event, and bills what streamed on a client abort', async () => {
    const broken = claude().messages.stream(base, {
      headers: { 'x-mock-fail': 'error', 'x-mock-fail-after-tokens': '4' },
    });
    await expect(broken.finalMessage()).rejects.toThrow(/Overloaded/);
    expect(mock.upstream().stats().recent[0]).toMatchObject({
      outcome: 'error_stream',
      completionTokens: 4,
    });

    const controller = new AbortController();
    const stream = claude().messages.stream(base, {
      headers: { 'x-mock-token-delay-ms': '10', 'x-mock-completion-tokens': '200' },
      signal: controller.signal,
    });
    let deltas = 0;
    stream.on('text', () => {
      if (++deltas === 5) controller.abort();
    });
    await stream.done().catch(() => undefined);
    await waitFor(() => mock.upstream().stats().abortedByClient === 1, { what: 'abort seen' });
    expect(mock.upstream().stats().recent[1]!.completionTokens).toBeGreaterThanOrEqual(5);
    expect(mock.upstream().stats().recent[1]!.completionTokens).toBeLessThan(200);
  });

  it('obeys n_predict over max_tokens, as llama-server does on its Messages route', async () => {
    const res = await call(
      mock.upstream(),
      'POST',
      '/v1/messages',
      { ...base, max_tokens: 10, n_predict: 120 },
      { 'anthropic-version': '2023-06-01', 'x-mock-completion-tokens': '500' },
    );
    expect((res.json as { usage: { output_tokens: number } }).usage.output_tokens).toBe(120);
  });
});

describe('Anthropic auth', () => {
  it('takes the key as x-api-key and answers authentication_error without it', async () => {
    const upstream = await startMockUpstream({ port: 0, apiKey: 'sk-ant-mock' });
    try {
      const ok = await anthropicClient(upstream, { apiKey: 'sk-ant-mock' }).messages.create(base);
      expect(ok.type).toBe('message');
      const err = await anthropicClient(upstream, { apiKey: 'wrong' })
        .messages.create(base)
        .catch((e: unknown) => e);
      expect(err).toMatchObject({
        status: 401,
        error: { type: 'error', error: { type: 'authentication_error' } },
      });
    } finally {
      await upstream.stop();
    }
  });
});
