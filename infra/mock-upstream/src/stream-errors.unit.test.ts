import { describe, expect, it } from 'vitest';
import { call, useMockUpstream } from '../test/harness.js';

const mock = useMockUpstream();
const say = 'Write the weekly budget digest.';
const SURFACES = {
  chat: {
    path: '/v1/chat/completions',
    body: { model: 'gpt-4o', stream: true, messages: [{ role: 'user', content: say }] },
  },
  responses: { path: '/v1/responses', body: { model: 'gpt-4o', stream: true, input: say } },
  messages: {
    path: '/v1/messages',
    body: {
      model: 'claude-sonnet-4-5',
      stream: true,
      max_tokens: 100,
      messages: [{ role: 'user', content: say }],
    },
  },
} as const;

/** The stream's data payloads, parsed. */
function payloads(text: string): Record<string, unknown>[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]')
    .map((l) => JSON.parse(l.slice('data: '.length)) as Record<string, unknown>);
}

async function broken(surface: keyof typeof SURFACES, headers: Record<string, string>) {
  const { path, body } = SURFACES[surface];
  const res = await call(mock.upstream(), 'POST', path, body, {
    'anthropic-version': '2023-06-01',
    'x-mock-fail': 'error',
    'x-mock-completion-tokens': '10',
    ...headers,
  });
  expect(res.status).toBe(200);
  return payloads(res.text);
}

describe('an in-stream error says what x-mock-stream-error asks, on each surface', () => {
  it('Messages: an error event of the asked type, before any content at 0 tokens', async () => {
    const events = await broken('messages', { 'x-mock-stream-error': 'rate_limit' });
    expect(events.map((e) => e.type)).not.toContain('content_block_delta');
    expect(events.at(-1)).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
    const api = await broken('messages', { 'x-mock-stream-error': 'server' });
    expect(api.at(-1)).toMatchObject({ error: { type: 'api_error' } });
    const defaulted = await broken('messages', {});
    expect(defaulted.at(-1)).toMatchObject({ error: { type: 'overloaded_error' } });
  });

  it('Responses: an error event with its code, or response.failed with the usage written', async () => {
    const overloaded = await broken('responses', { 'x-mock-stream-error': 'overloaded' });
    expect(overloaded.at(-1)).toMatchObject({ type: 'error', code: 'server_is_overloaded' });
    const failed = await broken('responses', {
      'x-mock-stream-error': 'failed',
      'x-mock-fail-after-tokens': '3',
    });
    const last = failed.at(-1) as { type: string; response: Record<string, unknown> };
    expect(last.type).toBe('response.failed');
    expect(last.response).toMatchObject({
      status: 'failed',
      error: { code: 'server_error' },
      usage: { output_tokens: 3 },
    });
    const record = mock.upstream().stats().recent.at(-1)!;
    expect(record).toMatchObject({ outcome: 'error_stream', completionTokens: 3 });
    expect((last.response.usage as { input_tokens: number }).input_tokens).toBe(
      record.promptTokens,
    );
  });

  it('Chat: an error chunk with the asked type and code', async () => {
    const events = await broken('chat', { 'x-mock-stream-error': 'rate_limit' });
    expect(events.at(-1)).toMatchObject({ error: { code: 'rate_limit_exceeded' } });
  });

  it('refuses an unknown kind', async () => {
    const { path, body } = SURFACES.chat;
    const res = await call(mock.upstream(), 'POST', path, body, {
      'x-mock-fail': 'error',
      'x-mock-stream-error': 'teapot',
    });
    expect(res.status).toBe(400);
    expect(res.text).toContain('x-mock-stream-error');
  });

  it('fail-next queues it too', async () => {
    mock.upstream().failNext({ status: 'error', streamError: 'rate_limit' });
    const { path, body } = SURFACES.messages;
    const res = await call(mock.upstream(), 'POST', path, body, {
      'anthropic-version': '2023-06-01',
    });
    expect(payloads(res.text).at(-1)).toMatchObject({ error: { type: 'rate_limit_error' } });
  });
});
