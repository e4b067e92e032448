import { RateLimitError } from 'openai';
import { describe, expect, it } from 'vitest';
import { call, useMockUpstream } from '../test/harness.js';
import { CapacityLimiter } from './capacity.js';
import { loadConfig } from './config.js';
import { formatReset } from './surface.js';

describe('CapacityLimiter (sliding 60 s)', () => {
  it('admits up to the limit in any 60 s, and says when room comes back', () => {
    let now = 1_000_000;
    const limiter = new CapacityLimiter(() => now);
    limiter.configure({ tokensPerMinute: 1000, requestsPerMinute: null, count: 'requested' });
    expect(limiter.admit(600).ok).toBe(true);
    now += 10_000;
    expect(limiter.admit(300).ok).toBe(true);
    now += 10_000;
    const refused = limiter.admit(200);
    // The 600 from 20 s ago leaves the window in 40 s.
    expect(refused).toMatchObject({
      ok: false,
      error: { limit: 'tokens', retryAfterMs: 40_000, used: 900 },
    });
    expect(!refused.ok && refused.error.view).toMatchObject({
      limitTokens: 1000,
      remainingTokens: 100,
      resetTokensMs: 50_000,
    });
    now += 40_000;
    expect(limiter.admit(200).ok).toBe(true);
    const stats = limiter.snapshot();
    expect(stats.rejected).toBe(1);
    expect(stats.peak).toMatchObject({ acceptedTokens: 900, tokens: 1100 });
    expect(stats.window).toEqual({ tokens: 500, requests: 2 });
  });

  it('limits requests per minute too, and a request larger than the limit never fits', () => {
    let now = 0;
    const limiter = new CapacityLimiter(() => now);
    limiter.configure({ tokensPerMinute: 100, requestsPerMinute: 2, count: 'requested' });
    expect(limiter.admit(1).ok && limiter.admit(1).ok).toBe(true);
    now += 1_500;
    expect(limiter.admit(1)).toMatchObject({
      ok: false,
      error: { limit: 'requests', retryAfterMs: 58_500 },
    });
    expect(limiter.admit(500)).toMatchObject({
      ok: false,
      error: { limit: 'tokens', retryAfterMs: 60_000 },
    });
  });

  it('counts output when the call ends with count: usage', () => {
    const limiter = new CapacityLimiter(() => 0);
    limiter.configure({ tokensPerMinute: 100, requestsPerMinute: null, count: 'usage' });
    limiter.admit(30);
    limiter.addOutput(50);
    expect(limiter.snapshot().window).toEqual({ tokens: 80, requests: 1 });
    expect(limiter.admit(21).ok).toBe(false);
  });

  it('formats reset durations as OpenAI does', () => {
    expect([360_000, 1_500, 20, 61_250, 1_000].map(formatReset)).toEqual([
      '6m0s',
      '1.5s',
      '20ms',
      '1m1.25s',
      '1s',
    ]);
  });
});

const mock = useMockUpstream();
const body = {
  model: 'gpt-4o-mini',
  messages: [{ role: 'user' as const, content: 'hello' }],
  max_tokens: 100,
};

describe('the account limit over HTTP', () => {
  it('answers 429 past tokensPerMinute with OpenAI headers, and counts what it received', async () => {
    const put = await call(mock.upstream(), 'PUT', '/_mock/config', {
      capacity: { tokensPerMinute: 250 },
      completion: { mode: 'fixed', tokens: 5 },
    });
    expect(put.status).toBe(200);
    const client = mock.client();
    const first = await client.chat.completions.create(body).withResponse();
    const prompt = first.data.usage!.prompt_tokens;
    // The limit counts the prompt plus max_tokens on arrival (OpenAI's rule).
    expect(first.response.headers.get('x-ratelimit-limit-tokens')).toBe('250');
    expect(first.response.headers.get('x-ratelimit-remaining-tokens')).toBe(
      String(250 - prompt - 100),
    );
    expect(first.response.headers.get('x-ratelimit-reset-tokens')).toMatch(
      /^(59|60)(\.\d+)?s$|^1m0s$/,
    );
    await client.chat.completions.create(body);
    const err = await client.chat.completions.create(body).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitError);
    const limited = err as RateLimitError;
    expect(limited.type).toBe('tokens');
    expect(limited.code).toBe('rate_limit_exceeded');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(55);
    expect(limited.headers.get('x-ratelimit-remaining-tokens')).toBe(
      String(250 - 2 * (prompt + 100)),
    );

    const capacity = (await call(mock.upstream(), 'GET', '/_mock/capacity')).json as {
      rejected: number;
      minutes: { tokens: number; acceptedTokens: number; rejected: number }[];
      peak: { acceptedTokens: number };
    };
    expect(capacity.rejected).toBe(1);
    expect(capacity.peak.acceptedTokens).toBe(2 * (prompt + 100));
    expect(capacity.minutes.reduce((n, m) => n + m.rejected, 0)).toBe(1);
    const stats = mock.upstream().stats();
    expect(stats.recent.map((r) => r.outcome)).toEqual(['completed', 'completed', 'rate_limited']);
    expect(stats.errorsInjected['429']).toBe(0);
    expect(stats.inFlight).toBe(0);
  });

  it('records arrivals even with no limit set, and reset clears them', async () => {
    await mock.client().chat.completions.create(body);
    expect(mock.upstream().stats().capacity.window.requests).toBe(1);
    mock.upstream().reset();
    expect(mock.upstream().stats().capacity.window.requests).toBe(0);
  });
});

describe('MOCK_UPSTREAM_TPM / MOCK_UPSTREAM_RPM', () => {
  it('set the account limit from the environment', () => {
    expect(loadConfig({ MOCK_UPSTREAM_TPM: '20000' }).options.behaviour?.capacity).toEqual({
      tokensPerMinute: 20_000,
      requestsPerMinute: null,
      count: 'requested',
    });
    expect(loadConfig({}).options.behaviour?.capacity).toBeNull();
  });
});
