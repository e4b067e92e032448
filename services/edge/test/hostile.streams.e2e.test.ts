import { expect } from 'vitest';
import { edgeTest as test, KEYS, type Stack } from './harness.js';
import { billedAsProvider, CLAUDE, post, withClaude, words } from './surfaces.js';

/**
 * Red team, streams that never finish: the upstream drops the connection, or breaks off with
 * its error event, after 10 tokens, before its terminal event (Responses' response.completed,
 * Anthropic's message_delta and message_stop). Whatever the surface and whether the client
 * streams: an error in the surface's shape, what streamed billed as the provider billed it,
 * nothing held.
 */

const responses = (stream: boolean) => ({
  model: 'gpt-4o-mini',
  input: words(20),
  max_output_tokens: 100,
  stream,
});
const messages = (stream: boolean) => ({
  model: CLAUDE,
  max_tokens: 100,
  messages: [{ role: 'user', content: words(20) }],
  stream,
});

async function broken(
  s: Stack,
  path: string,
  body: Record<string, unknown>,
  headers: Record<string, string>,
): Promise<string> {
  const res = await fetch(`${s.edge.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (body.stream) {
    // Streaming: the answer began (200), and ends with an error event, never a terminal one.
    expect(res.status).toBe(200);
    expect(text).toContain('event: error');
    expect(text).not.toContain('response.completed');
    expect(text).not.toContain('message_stop');
  } else {
    // Anthropic's overloaded_error in the stream is its 529; a dropped one, or Responses'
    // server_error, the gateway's 502.
    const overloaded = path === '/v1/messages' && text.includes('overloaded_error');
    expect(res.status).toBe(overloaded ? 529 : 502);
  }
  return text;
}

test('Responses and Messages streams cut before their terminal event: an error, the streamed tokens billed as the provider billed them, nothing held', async ({
  stack,
}) => {
  const s = await stack({ patch: withClaude });
  const openai = { authorization: `Bearer ${KEYS.support}` };
  const claude = { 'x-api-key': KEYS.support };
  for (const status of ['drop', 'error'] as const) {
    for (const stream of [true, false]) {
      s.upstream.failNext({ status, afterTokens: 10 });
      await broken(s, '/v1/responses', responses(stream), openai);
      s.upstream.failNext({ status, afterTokens: 10 });
      const text = await broken(s, '/v1/messages', messages(stream), claude);
      if (!stream) expect(JSON.parse(text)).toMatchObject({ type: 'error' });
      await billedAsProvider(s, 'support-bot');
    }
  }
  const records = s.upstream.stats().recent;
  expect(records).toHaveLength(8);
  expect(records.every((r) => r.completionTokens === 10)).toBe(true);
  // A call after them is served as usual: nothing stayed behind.
  expect((await post(s, '/v1/responses', responses(false), openai)).status).toBe(200);
  await billedAsProvider(s, 'support-bot');
});
