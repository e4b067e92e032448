import { createRequire } from 'node:module';
import { expect, vi } from 'vitest';
import { chat, edgeTest as test, KEYS } from './harness.js';
import { anthropic, CLAUDE, withClaude } from './surfaces.js';

/** The ajv the events package compiles its checks with (its dependency, not this package's). */
const { Ajv } = createRequire(new URL('../../../packages/events/package.json', import.meta.url))(
  'ajv',
) as { Ajv: { prototype: { compile(schema: object): unknown } } };

test('a ready edge has its checks compiled: its first calls on each surface compile nothing', async ({
  stack,
}) => {
  // Ready: the harness hands the stack over once /readyz answers 200.
  const s = await stack({ patch: withClaude });
  const compile = vi.spyOn(Ajv.prototype, 'compile');
  // Compiled on the first call instead (the body's check, the admit and close replies' parses),
  // they took 3-5 s of the edge's event loop on a box at load 30: every call in flight waited.
  const openai = s.openai(KEYS.support);
  const plain = await openai.chat.completions.create(chat());
  expect(plain.choices[0]?.finish_reason).toBe('stop');
  const stream = await openai.chat.completions.create({ ...chat(), stream: true });
  for await (const chunk of stream) void chunk;
  const response = await openai.responses.create({ model: 'gpt-4o-mini', input: 'a budget' });
  expect(response.status).toBe('completed');
  const message = await anthropic(s, KEYS.support).messages.create({
    model: CLAUDE,
    max_tokens: 64,
    messages: [{ role: 'user', content: 'a budget report' }],
  });
  expect(message.stop_reason).toBe('end_turn');
  await s.settled('support-bot');
  expect(compile).not.toHaveBeenCalled();
});
