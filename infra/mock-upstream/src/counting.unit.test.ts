import { RateLimitError } from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { anthropicClient, useMockUpstream } from '../test/harness.js';

const mock = useMockUpstream();
const count = {
  model: 'claude-sonnet-4-5',
  messages: [{ role: 'user' as const, content: 'How long is this?' }],
};

describe('the counting endpoints', () => {
  it('answer after their own latency, and say how many were open at once', async () => {
    mock.upstream().configure({ counting: { latencyMs: 150 } });
    const client = anthropicClient(mock.upstream());
    const started = performance.now();
    const counted = await Promise.all(
      Array.from({ length: 3 }, () => client.messages.countTokens(count)),
    );
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
    for (const c of counted) expect(c.input_tokens).toBeGreaterThan(0);
    expect(mock.upstream().stats().counting).toEqual({ inFlight: 0, peakInFlight: 3, rejected: 0 });
  });

  it('keep a requests-per-minute limit of their own: 429 with Retry-After past it, the model routes untouched', async () => {
    mock.upstream().configure({ counting: { requestsPerMinute: 2 } });
    const client = anthropicClient(mock.upstream(), { maxRetries: 0 });
    await client.messages.countTokens(count);
    await client.messages.countTokens(count);
    const limited = await client.messages.countTokens(count).catch((e: unknown) => e);
    expect(limited).toBeInstanceOf(RateLimitError);
    expect(Number((limited as RateLimitError).headers?.get('retry-after'))).toBeGreaterThan(50);
    expect((limited as RateLimitError).error).toMatchObject({
      error: { type: 'rate_limit_error' },
    });
    // OpenAI's input_tokens shares the counting limit; its 429 is in OpenAI's shape.
    const openai = mock.client();
    const input = await openai.responses.inputTokens
      .count({ model: 'gpt-4o-mini', input: 'How long is this?' })
      .catch((e: unknown) => e);
    expect(input).toMatchObject({ status: 429, error: { type: 'requests' } });
    // Model calls are not counted against it.
    const message = await client.messages.create({ ...count, max_tokens: 5 });
    expect(message.usage.output_tokens).toBeGreaterThan(0);
    expect(mock.upstream().stats().counting.rejected).toBe(2);
  });
});
