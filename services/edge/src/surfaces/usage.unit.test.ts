import { expect, test } from 'vitest';
import { addUsage, plainUsage } from './usage.js';

test('two attempts of one call add up: every count, tool uses by kind, the later tier', () => {
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
  });
  expect(addUsage(plainUsage(5, 0), plainUsage(5, 1))).toEqual(plainUsage(10, 1));
});
