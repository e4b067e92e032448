import { createHook } from 'node:async_hooks';
import { expect, it } from 'vitest';
import { useMockUpstream } from '../test/harness.js';

const mock = useMockUpstream();

/** Timers set in this process while a reply of `tokens` at `tokenDelayMs` a token streams. */
async function timersFor(tokenDelayMs: number, tokens: number): Promise<number> {
  mock.upstream().configure({ tokenDelayMs, completion: { mode: 'fixed', tokens } });
  let timers = 0;
  const hook = createHook({
    init: (_id, type) => {
      if (type === 'Timeout') timers += 1;
    },
  }).enable();
  try {
    const res = await fetch(`${mock.upstream().url}/chat/completions`, {
      method: 'POST',
      headers: { authorization: 'Bearer sk-test', 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'gpt-4o-mini',
        stream: true,
        max_tokens: tokens,
        messages: [{ role: 'user', content: 'Say it.' }],
      }),
    });
    expect(await res.text()).toContain('[DONE]');
  } finally {
    hook.disable();
  }
  return timers;
}

it('a token delay under a timer’s 1 ms is kept on average: 0.1 ms a token sleeps 1 ms every 10 tokens, not 1 ms each', async () => {
  // Counted, not timed: a loaded box stretches every wait. Before, node made every delay under
  // 1 ms a 1 ms timer (999 here), and a loaded box makes each several: a 200,000-token reply
  // meant as a fast provider took minutes.
  expect(await timersFor(1, 1_000)).toBeGreaterThanOrEqual(999);
  expect(await timersFor(0.1, 1_000)).toBeLessThan(150);
  expect(mock.upstream().stats().billed.completionTokens).toBe(2_000);
});
