import { expect, test } from 'vitest';
import { addUsage, plainUsage } from './usage.js';

test('two attempts of one call add up: every count, tool uses by kind, the later tier, the larger prompt', () => {
  const failed = { ...plainUsage(30, 0), cachedPromptTokens: 10, toolUses: { web_search: 1 } };
  const answered = {
    ...plainUsage(30, 12),
    reasoningTokens: 4,
    serviceTier: 'priority' as const,
    toolUses: { web_search: 2 },
  };
  expect(addUsage(failed, answered)).toEqual({
    ...plainUsage(60, 12),
    cachedPromptTokens: 10,
    reasoningTokens: 4,
    serviceTier: 'priority',
    toolUses: { web_search: 3 },
    longestPromptTokens: 30,
  });
  expect(addUsage(plainUsage(5, 0), plainUsage(5, 1))).toEqual({
    ...plainUsage(10, 1),
    longestPromptTokens: 5,
  });
  // Three requests: the largest of them, not their sum (the long-context line is per request).
  const two = addUsage(plainUsage(7, 0), plainUsage(4, 0));
  expect(addUsage(two, plainUsage(6, 2))).toEqual({ ...plainUsage(17, 2), longestPromptTokens: 7 });
});
