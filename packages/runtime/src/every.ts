import { errorMessage } from './errors.js';
import type { Logger } from './logger.js';

export interface EveryOptions {
  logger: Logger;
  /** The message logged, with `err`, when a pass fails (the next pass runs anyway). */
  failed: string;
  /** `debug` for a pass whose failure other logs already tell (default `warn`). */
  level?: 'warn' | 'debug';
}

/** A task running on a timer: `stop()` clears it and waits for the pass under way. */
export interface Periodic {
  stop(): Promise<void>;
}

/**
 * Runs `task` every `ms`, one pass at a time: a tick that finds a pass under way is skipped,
 * so a slow pass delays the next instead of stacking. A pass that fails is logged and the
 * next one runs. The timer does not keep the process alive (the service's connections do).
 * `stop()` clears the timer and waits for the pass under way; no pass starts after it, and
 * calling it again does nothing more.
 */
export function every(ms: number, task: () => Promise<unknown>, opts: EveryOptions): Periodic {
  let running: Promise<void> | undefined;
  const pass = async (): Promise<void> => {
    try {
      await task();
    } catch (err) {
      opts.logger[opts.level ?? 'warn']({ err: errorMessage(err) }, opts.failed);
    }
  };
  const timer = setInterval(() => {
    running ??= pass().finally(() => (running = undefined));
  }, ms);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
