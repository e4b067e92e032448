import { createLogger } from '@holdfast/runtime';
import { expect, vi } from 'vitest';
import { chat, edgeTest as test, KEYS } from './harness.js';

test('a call that goes well makes no per-request child logger (its summary line is the only line)', async ({
  stack,
}) => {
  const logger = createLogger({ name: 'edge', level: 'warn' });
  const child = vi.spyOn(logger, 'child');
  const s = await stack({ edge: { logger } });
  const perRequest = () => child.mock.calls.filter(([bindings]) => 'reqId' in bindings).length;
  const before = perRequest();
  const openai = s.openai(KEYS.support);
  for (const stream of [false, true]) {
    const r = await openai.chat.completions.create({ ...chat(20, { max_tokens: 50 }), stream });
    if (stream) for await (const _ of r as AsyncIterable<unknown>) void _;
  }
  await s.settled('support-bot');
  expect(perRequest() - before).toBe(0);
});
