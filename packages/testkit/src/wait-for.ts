/**
 * Polls `probe` until it returns a truthy value or the deadline passes. Use instead of sleeps:
 * it returns as soon as the condition holds and says what it waited for when it does not.
 */
export async function waitFor<T>(
  probe: () => T | Promise<T>,
  opts: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + (opts.timeoutMs ?? 10_000);
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value) return value;
      last = value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      const detail = last instanceof Error ? last.message : JSON.stringify(last);
      throw new Error(
        `timed out after ${opts.timeoutMs ?? 10_000} ms waiting for ${opts.what ?? 'condition'} (last: ${detail})`,
      );
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 25));
  }
}
