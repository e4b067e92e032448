import { retry } from '@holdfast/retry';

/**
 * Polls `probe` until it returns a truthy value or the deadline passes. Use instead of sleeps:
 * it returns as soon as the condition holds and says what it waited for when it does not.
 */
export async function waitFor<T>(
  probe: () => T | Promise<T>,
  opts: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<NonNullable<T>> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const intervalMs = opts.intervalMs ?? 25;
  let last: unknown;
  const value = await retry(
    async () => {
      try {
        last = await probe();
        return last as T;
      } catch (err) {
        last = err;
        return undefined;
      }
    },
    {
      policy: { initialMs: intervalMs, maxMs: intervalMs, factor: 1, retryForMs: timeoutMs },
      retryIf: (v) => !v,
    },
  );
  if (value) return value;
  const detail = last instanceof Error ? last.message : JSON.stringify(last);
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${opts.what ?? 'condition'} (last: ${detail})`,
  );
}
