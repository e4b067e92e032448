import { expect } from 'vitest';
import { chat, edgeTest as test, entry, KEYS } from './harness.js';

test('baseUrlEnv: the edge calls the URL in that variable instead of baseUrl', async ({
  stack,
}) => {
  // The edge reads the variable when a call goes out; the mock's URL is known once it runs.
  const env: NodeJS.ProcessEnv = {};
  const s = await stack({
    edge: { env },
    patch: (c) => {
      const upstream = entry(c.upstreams, 'default');
      // Nothing listens here: only the variable can make the call succeed.
      upstream.baseUrl = 'http://127.0.0.1:9/v1';
      upstream.baseUrlEnv = 'HOLDFAST_TEST_UPSTREAM_URL';
    },
  });
  env.HOLDFAST_TEST_UPSTREAM_URL = s.upstream.url;
  const reply = await s.openai(KEYS.support).chat.completions.create(chat(5, { max_tokens: 3 }));
  expect(reply.usage?.completion_tokens).toBe(3);
  expect(s.upstream.stats().completed).toBe(1);

  // A value that is not an http(s) URL is ignored: baseUrl is used (and fails here).
  env.HOLDFAST_TEST_UPSTREAM_URL = 'not a url';
  await expect(
    s.openai(KEYS.support).chat.completions.create(chat(5, { max_tokens: 3 })),
  ).rejects.toMatchObject({ status: 502 });
});
