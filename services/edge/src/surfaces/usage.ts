import { Usage } from '@holdfast/events';

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

/**
 * The token counts of a usage (every field of the schema but the tier, the tool uses and the
 * largest request's prompt).
 */
const COUNTS = Object.keys(Usage.shape).filter(
  (k): k is Exclude<keyof Usage, 'serviceTier' | 'toolUses' | 'longestPromptTokens'> =>
    k !== 'serviceTier' && k !== 'toolUses' && k !== 'longestPromptTokens',
);

/**
 * Two usages of one call together (an attempt the provider failed in its stream and billed,
 * then the attempt that answered): every count added, tool uses by kind; the tier the later
 * one was served at; the larger request's prompt (`longestPromptTokens`: the provider prices
 * long context per request, not on the sum).
 */
export function addUsage(a: Usage, b: Usage): Usage {
  const sum: Usage = { ...b };
  for (const k of COUNTS) sum[k] = (a[k] ?? 0) + (b[k] ?? 0);
  sum.longestPromptTokens = Math.max(
    a.longestPromptTokens ?? a.promptTokens,
    b.longestPromptTokens ?? b.promptTokens,
  );
  if (a.toolUses || b.toolUses) {
    const uses = { ...a.toolUses };
    for (const [kind, n] of Object.entries(b.toolUses ?? {}) as [keyof typeof uses, number][]) {
      uses[kind] = (uses[kind] ?? 0) + n;
    }
    sum.toolUses = uses;
  }
  if (!b.serviceTier && a.serviceTier) sum.serviceTier = a.serviceTier;
  return sum;
}
