/** A usage figure the authority accepts: a non-negative integer within its limits, else undefined. */
export function usageCount(n: unknown): number | undefined {
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 0 && n <= 4_000_000
    ? n
    : undefined;
}
