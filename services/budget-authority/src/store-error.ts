import { Err, Ok, RpcError } from '@holdfast/runtime';
import type { Logger } from '@holdfast/runtime';

/**
 * Runs a Redis step; a failure becomes `budget_store_unavailable` (fail closed: the caller
 * never admits on an error).
 */
export async function withStore<T>(logger: Logger, op: string, step: () => Promise<T>) {
  try {
    return Ok(await step());
  } catch (err) {
    logger.error({ err, op }, 'budget store failed');
    return Err(
      new RpcError({
        code: 'budget_store_unavailable',
        message: 'budget store unavailable',
        retry: true,
        cause: err,
      }),
    );
  }
}
