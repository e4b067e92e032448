import type { Logger } from 'pino';

export interface Stoppable {
  name: string;
  stop: () => Promise<void> | void;
}

/**
 * The one shutdown path of a process, used only by a service's main.ts. On SIGINT/SIGTERM it
 * stops every component in reverse start order, each with a deadline, then exits. A second
 * signal exits at once.
 */
export function handleShutdown(logger: Logger, components: Stoppable[], timeoutMs = 15_000): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'shutting down');
    void stopAll(logger, components, timeoutMs).then((clean) => exitFlushed(logger, clean ? 0 : 1));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

/** How long the exit waits for the log lines still buffered to be written. */
const FLUSH_TIMEOUT_MS = 2_000;

/**
 * Exits once the logger's buffered lines are written. pino also writes them synchronously on
 * `exit`, but not a block already handed to the thread pool, which exit can cut short; waiting
 * for the flush loses neither.
 */
function exitFlushed(logger: Logger, code: number): void {
  const exit = () => process.exit(code);
  setTimeout(exit, FLUSH_TIMEOUT_MS).unref();
  try {
    logger.flush(exit);
  } catch {
    exit();
  }
}

/** Stops components in reverse order; resolves false if any failed or timed out. */
export async function stopAll(
  logger: Logger,
  components: Stoppable[],
  timeoutMs = 15_000,
): Promise<boolean> {
  let clean = true;
  for (const c of [...components].reverse()) {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        Promise.resolve(c.stop()),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
      logger.debug({ component: c.name }, 'stopped');
    } catch (err) {
      clean = false;
      logger.error({ err, component: c.name }, 'failed to stop cleanly');
    } finally {
      clearTimeout(timer);
    }
  }
  return clean;
}
