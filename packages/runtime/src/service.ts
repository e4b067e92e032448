import type { Logger } from 'pino';
import type { ReadinessCheck } from './ops-server.js';
import { stopAll, type Stoppable } from './shutdown.js';

/**
 * What a service's `start(config, deps)` returns. Its main.ts serves `checks` on /readyz and
 * hands `stop` to handleShutdown; tests call `stop` themselves.
 */
export interface Started {
  stop(): Promise<void>;
  checks: ReadinessCheck[];
}

/**
 * Stops parts in reverse start order, each with its own deadline. Every part is tried even
 * when one fails; then it rejects if any failed or timed out.
 */
export async function stopInReverse(
  logger: Logger,
  parts: Stoppable[],
  timeoutMs = 15_000,
): Promise<void> {
  if (!(await stopAll(logger, parts, timeoutMs))) {
    throw new Error('did not stop cleanly (see log)');
  }
}

/**
 * Wires a service: `build` pushes each part onto `parts` as soon as it has started. When
 * `build` throws, the parts started so far stop (reverse) before the error goes on, so a
 * failed start leaves no connection open; otherwise `stop` stops them all in reverse.
 */
export async function startParts<T extends { checks: ReadinessCheck[] }>(
  logger: Logger,
  build: (parts: Stoppable[]) => Promise<T> | T,
  timeoutMs?: number,
): Promise<T & Started> {
  const parts: Stoppable[] = [];
  try {
    const built = await build(parts);
    return { ...built, stop: () => stopInReverse(logger, parts, timeoutMs) };
  } catch (err) {
    await stopAll(logger, parts, timeoutMs);
    throw err;
  }
}
