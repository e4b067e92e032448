import { retry, type RetryPolicy } from '@holdfast/retry';
import { Err, Ok, RpcError } from '@holdfast/runtime';
import type { Logger } from '@holdfast/runtime';
import { ReplyError } from 'ioredis';

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

/** Replies of a Redis that is there but not serving yet (or moving a slot): worth a wait. */
const NOT_READY = /^(LOADING|BUSY|TRYAGAIN|CLUSTERDOWN|MASTERDOWN)\b/;

/**
 * Whether `err` is Redis not answering (a command timeout, a lost or refused connection) or
 * not ready yet (LOADING its AOF, BUSY, a cluster moving): the same command may work later. An
 * error Redis answered otherwise (a script's own error, a wrong type) is not.
 */
export function storeUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err instanceof ReplyError) return NOT_READY.test(err.message);
  // A step that said which node failed (loadScripts) keeps Redis's own error as its cause.
  return err.cause instanceof Error ? storeUnavailable(err.cause) : true;
}

/**
 * How long a starting authority waits for a Redis that does not answer: with appendfsync
 * always, an fsync stall on a busy disk holds every reply past the 1 s command timeout
 * (seen: a start failing at its first write while other processes flushed).
 */
const START_RETRY: RetryPolicy = { initialMs: 100, maxMs: 2_000, retryForMs: 30_000 };

/**
 * Runs an idempotent startup step against Redis again while Redis does not answer (see
 * `storeUnavailable`), for up to START_RETRY's 30 s; then, or on any other error, throws.
 */
export function whileStoreStarts<T>(logger: Logger, step: string, run: () => Promise<T>) {
  return retry(run, {
    policy: START_RETRY,
    retryable: storeUnavailable,
    onRetry: ({ attempt, delayMs, outcome }) =>
      logger.warn(
        { step, attempt, delayMs, err: outcome.ok ? undefined : String(outcome.error) },
        'redis did not answer a startup step; retrying',
      ),
  });
}
