import { waitFor } from '@holdfast/testkit';
import { APIConnectionError, APIError, APIUserAbortError, RateLimitError } from 'openai';
import { describe, expect, it } from 'vitest';
import { call, useMockUpstream } from '../test/harness.js';

const mock = useMockUpstream();
const body = {
  model: 'gpt-4o',
  messages: [{ role: 'user' as const, content: 'Write the weekly budget digest.' }],
  max_tokens: 200,
};

describe('error injection', () => {
  it('answers 500 with an OpenAI error body, billing nothing', async () => {
    const err = await mock
      .client()
      .chat.completions.create(body, { headers: { 'x-mock-fail': '500' } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(APIError);
    expect((err as APIError).status).toBe(500);
    expect((err as APIError).type).toBe('server_error');
    const stats = mock.upstream().stats();
    expect(stats.errorsInjected['500']).toBe(1);
    expect(stats.billed).toMatchObject({ promptTokens: 0, completionTokens: 0 });
    expect(stats.recent[0]).toMatchObject({ outcome: 'error_500', failure: '500' });
  });

  it('answers 429 with Retry-After, and the client honours it', async () => {
    const err = await mock
      .client()
      .chat.completions.create(body, {
        headers: { 'x-mock-fail': '429', 'x-mock-retry-after': '7' },
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitError);
    expect((err as RateLimitError).headers.get('retry-after')).toBe('7');
    expect((err as RateLimitError).code).toBe('rate_limit_exceeded');

    // Two queued 429s (50 ms each), then success: the client retries through them.
    mock.upstream().failNext({ status: 429, count: 2, retryAfter: 0.05 });
    const res = await mock.client({ maxRetries: 2 }).chat.completions.create(body);
    expect(res.choices[0]!.finish_reason).toBe('stop');
    const stats = mock.upstream().stats();
    expect(stats.errorsInjected['429']).toBe(3);
    expect(stats.requests.chatCompletions).toBe(4);
    expect(stats.completed).toBe(1);
  });

  it('hangs until the client aborts, and counts the abort', async () => {
    const controller = new AbortController();
    const pending = mock.client().chat.completions.create(body, {
      headers: { 'x-mock-fail': 'hang' },
      signal: controller.signal,
    });
    await waitFor(() => mock.upstream().stats().inFlight === 1, { what: 'request in flight' });
    controller.abort();
    await expect(pending).rejects.toBeInstanceOf(APIUserAbortError);
    await waitFor(() => mock.upstream().stats().abortedByClient === 1, { what: 'abort seen' });
    expect(mock.upstream().stats()).toMatchObject({
      inFlight: 0,
      errorsInjected: { hang: 1 },
      billed: { completionTokens: 0 },
    });
  });

  it('a client timeout on a hang is an abort too', async () => {
    const pending = mock
      .client({ timeout: 150 })
      .chat.completions.create(body, { headers: { 'x-mock-fail': 'hang' } });
    await expect(pending).rejects.toThrow(/timed out/i);
    await waitFor(() => mock.upstream().stats().abortedByClient === 1, { what: 'abort seen' });
  });

  it('drops the connection mid-stream after N tokens and bills those tokens', async () => {
    const stream = await mock
      .client()
      .chat.completions.create(
        { ...body, stream: true, stream_options: { include_usage: true } },
        { headers: { 'x-mock-fail': 'drop', 'x-mock-fail-after-tokens': '3' } },
      );
    const received: string[] = [];
    const err = await (async () => {
      for await (const chunk of stream) {
        const content = chunk.choices[0]?.delta.content;
        if (content) received.push(content);
      }
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(received).toHaveLength(3);
    const stats = mock.upstream().stats();
    expect(stats.recent[0]).toMatchObject({ outcome: 'dropped', completionTokens: 3 });
    expect(stats.abortedByClient).toBe(0);
    expect(stats.billed.completionTokens).toBe(3);
    expect(stats.usage.completionTokens).toBe(0);
  });

  it('drops a non-streaming request before any byte', async () => {
    const err = await mock
      .client()
      .chat.completions.create(body, { headers: { 'x-mock-fail': 'drop' } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(APIConnectionError);
    expect(mock.upstream().stats()).toMatchObject({
      errorsInjected: { drop: 1 },
      abortedByClient: 0,
    });
  });

  it('queued failures apply to the next N requests, in order, then stop', async () => {
    const { status, json } = await call(mock.upstream(), 'POST', '/_mock/fail-next', {
      status: 500,
      count: 2,
    });
    expect(status).toBe(200);
    expect(json).toEqual({ queued: 2 });
    mock.upstream().failNext({ status: 'drop' });
    const client = mock.client();
    const outcomes: (number | string)[] = [];
    for (let i = 0; i < 4; i++) {
      outcomes.push(
        await client.chat.completions.create(body).then(
          () => 'ok',
          (e: unknown): number | string =>
            e instanceof APIError && typeof e.status === 'number' ? e.status : 'connection',
        ),
      );
    }
    expect(outcomes).toEqual([500, 500, 'connection', 'ok']);
  });
});

describe('abort detection', () => {
  it('sees a client leave mid-stream and bills the tokens sent before it', async () => {
    const controller = new AbortController();
    const stream = await mock.client().chat.completions.create(
      { ...body, stream: true },
      {
        headers: { 'x-mock-completion-tokens': '100', 'x-mock-token-delay-ms': '10' },
        signal: controller.signal,
      },
    );
    let seen = 0;
    await (async () => {
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta.content && ++seen === 5) controller.abort();
      }
    })().catch(() => undefined);
    await waitFor(() => mock.upstream().stats().abortedByClient === 1, { what: 'abort seen' });
    const record = mock.upstream().stats().recent[0]!;
    expect(record.outcome).toBe('aborted');
    expect(record.completionTokens).toBeGreaterThanOrEqual(5);
    expect(record.completionTokens).toBeLessThan(100);
    expect(mock.upstream().stats().billed.completionTokens).toBe(record.completionTokens);
  });

  it('stalls a stream after N tokens with hang, until the client leaves', async () => {
    const controller = new AbortController();
    const stream = await mock.client().chat.completions.create(
      { ...body, stream: true },
      {
        headers: { 'x-mock-fail': 'hang', 'x-mock-fail-after-tokens': '2' },
        signal: controller.signal,
      },
    );
    let seen = 0;
    const reading = (async () => {
      for await (const chunk of stream) if (chunk.choices[0]?.delta.content) seen += 1;
    })().catch(() => undefined);
    await waitFor(() => seen === 2, { what: 'two tokens' });
    controller.abort();
    await reading;
    await waitFor(() => mock.upstream().stats().abortedByClient === 1, { what: 'abort seen' });
    expect(mock.upstream().stats().recent[0]).toMatchObject({
      completionTokens: 2,
      failure: 'hang',
    });
  });

  it('bills a non-streaming reply in full when its client leaves during generation', async () => {
    const controller = new AbortController();
    const pending = mock
      .client()
      .chat.completions.create(
        { ...body, max_tokens: 30 },
        { headers: { 'x-mock-latency-ms': '5000' }, signal: controller.signal },
      );
    await waitFor(() => mock.upstream().stats().inFlight === 1, { what: 'request in flight' });
    controller.abort();
    await expect(pending).rejects.toBeInstanceOf(APIUserAbortError);
    await waitFor(() => mock.upstream().stats().abortedByClient === 1, { what: 'abort seen' });
    expect(mock.upstream().stats().billed.completionTokens).toBe(30);
  });
});

describe('request checks', () => {
  it('rejects a bad body or header with OpenAI 400s', async () => {
    const client = mock.client();
    const noMessages = await client.chat.completions
      .create({ model: 'gpt-4o', messages: [] })
      .catch((e: unknown) => e);
    expect(noMessages).toMatchObject({
      status: 400,
      type: 'invalid_request_error',
      param: 'messages',
    });
    const badHeader = await client.chat.completions
      .create(body, { headers: { 'x-mock-fail': 'explode' } })
      .catch((e: unknown) => e);
    expect(badHeader).toMatchObject({ status: 400 });
    const notJson = await fetch(`${mock.upstream().url}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{nope',
    });
    expect(notJson.status).toBe(400);
    expect(await notJson.json()).toMatchObject({ error: { type: 'invalid_request_error' } });
  });
});
