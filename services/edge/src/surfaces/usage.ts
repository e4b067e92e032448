import type { Usage } from '@holdfast/events';

/** A usage figure the authority accepts: a non-negative integer within its limits, else undefined. */
export function usageCount(n: unknown): number | undefined {
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 0 && n <= 4_000_000
    ? n
    : undefined;
}

/** A usage without cache, reasoning or audio parts (what the edge counted itself). */
export function plainUsage(promptTokens: number, completionTokens: number): Usage {
  return {
    promptTokens,
    completionTokens,
    cachedPromptTokens: 0,
    cacheWrite5mTokens: 0,
    cacheWrite1hTokens: 0,
    reasoningTokens: 0,
    audioPromptTokens: 0,
    audioCompletionTokens: 0,
  };
}
