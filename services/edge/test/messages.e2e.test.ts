import { expect } from 'vitest';
import { edgeTest as test, KEYS } from './harness.js';
import { anthropic, CLAUDE, withClaude, words } from './surfaces.js';

test('messages.create: counted by the upstream count_tokens, admitted, answered, settled, recorded as messages', async ({
  stack,
}) => {
  const s = await stack({ patch: withClaude });
  const { data, response } = await anthropic(s, KEYS.support)
    .messages.create({
      model: CLAUDE,
      max_tokens: 100,
      system: 'You triage tickets.',
      messages: [{ role: 'user', content: words(20) }],
    })
    .withResponse();
  expect(data.type).toBe('message');
  expect(data.stop_reason).toBe('end_turn');
  const prompt = data.usage.input_tokens;
  expect(response.headers.get('x-holdfast-prompt-tokens')).toBe(String(prompt));
  expect(response.headers.get('x-holdfast-held')).toBe(String(prompt + 100));
  expect(s.upstream.stats().recent.at(-1)).toMatchObject({
    route: 'messages',
    stream: true,
    maxTokens: 100,
  });
  expect((await s.settled('support-bot')).billedTokens).toBe(prompt + 50);
});
