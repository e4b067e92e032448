import { fileURLToPath } from 'node:url';
import { natsNamesToEnv } from '@holdfast/config';
import { readyPort, startService, waitFor } from '@holdfast/testkit';
import OpenAI from 'openai';
import { expect } from 'vitest';
import { chat, edgeTest as test, entry, KEYS } from './harness.js';

const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));
const UPSTREAM_KEY = 'sk-upstream-provider-secret-7f3a';
const WRONG_KEY = 'sk-hf-wrong-but-secret-91c2';
const WRONG_X_API_KEY = 'sk-hf-x-api-key-secret-4e7b';

test('the edge process: ready on EDGE_PORT, logs without secrets, settles open streams on SIGTERM', async ({
  stack,
  natsUrl,
  iso,
}) => {
  const s = await stack({
    upstreamApiKey: UPSTREAM_KEY,
    behaviour: { tokenDelayMs: 20, completion: { mode: 'fixed', tokens: 1_000 } },
    patch: (c) => (entry(c.upstreams, 'default').apiKeyEnv = 'HOLDFAST_TEST_UPSTREAM_KEY'),
  });
  // EDGE_PORT 0: the edge binds a port of its own choosing and logs it when ready. A port
  // picked free beforehand can be taken by another test's connection before the edge binds it.
  const proc = await startService(MAIN, {
    NATS_URL: natsUrl,
    EDGE_PORT: '0',
    EDGE_HOST: '127.0.0.1',
    LOG_LEVEL: 'debug',
    HOLDFAST_TEST_UPSTREAM_KEY: UPSTREAM_KEY,
    ...natsNamesToEnv(iso.names),
  });
  try {
    const port = readyPort(proc, 'port');
    const url = `http://127.0.0.1:${port}`;
    expect(proc.lines.find((l) => l.includes('"msg":"ready"'))).toContain(`"port":${port}`);
    expect(await (await fetch(`${url}/readyz`)).json()).toMatchObject({ ok: true });
    const client = (key: string) =>
      new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0 });

    // The upstream requires its key: the edge sends it (from apiKeyEnv), never logs it.
    const done = await client(KEYS.support).chat.completions.create(chat(5, { max_tokens: 3 }));
    expect(done.choices[0]?.finish_reason).toBe('length');
    await expect(client(WRONG_KEY).chat.completions.create(chat())).rejects.toMatchObject({
      status: 401,
    });
    // Anthropic's clients send the key as x-api-key.
    const messages = await fetch(`${url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': WRONG_X_API_KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', max_tokens: 1, messages: [] }),
    });
    expect(messages.status).toBe(401);

    // A long stream is open when the process is told to stop.
    const stream = await client(KEYS.support).chat.completions.create({ ...chat(5), stream: true });
    const reading = (async () => {
      let n = 0;
      for await (const _ of stream) n++;
      return n;
    })().catch(() => -1);
    await waitFor(() => s.upstream.stats().inFlight === 1);
    await proc.stop();
    expect(await proc.exited).toBe(0);
    expect(await reading).not.toBe(0);
  } finally {
    await proc.stop();
  }
  // The cut stream was settled before the process exited: nothing is held.
  const usage = await s.settled('support-bot');
  expect(usage.billedTokens).toBeGreaterThan(12 + 3);

  const log = proc.lines.join('\n');
  for (const secret of [KEYS.support, WRONG_KEY, WRONG_X_API_KEY, UPSTREAM_KEY]) {
    expect(log).not.toContain(secret);
  }
  const upstreamLine = proc.lines.find((l) => l.includes('"msg":"upstream request"'));
  expect(JSON.parse(upstreamLine!)).toMatchObject({ headers: { authorization: '[redacted]' } });
  const summary = proc.lines
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .find((l) => l.msg === 'request' && l.status === 200);
  expect(summary).toMatchObject({
    route: '/v1/chat/completions',
    tenant: 'support-bot',
    keyId: 'support-1',
    useCase: 'UC-101',
    promptTokens: 12,
    completionTokens: 3,
    outcome: 'completed',
  });
  expect(proc.lines.some((l) => l.includes('"code":"invalid_api_key"'))).toBe(true);
  expect(proc.lines.some((l) => l.includes('"route":"/v1/messages"'))).toBe(true);
});
