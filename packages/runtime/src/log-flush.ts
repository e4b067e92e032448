import type { pino } from 'pino';

type Destination = ReturnType<typeof pino.destination>;

/**
 * Writes out what a buffering pino destination holds `delayMs` after a line arrived, and
 * keeps no timer while nothing waits. sonic-boom's own `periodicFlush` ticks forever: an
 * idle service made an empty write(2) on the thread pool five times a second (issue 14).
 * Install `line` as pino's `streamWrite` hook.
 */
export class LazyFlush {
  readonly #dest: Destination;
  readonly #delayMs: number;
  /** Bytes handed to the destination that it has not reported written yet. */
  #waiting = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(dest: Destination, delayMs: number) {
    this.#dest = dest;
    this.#delayMs = delayMs;
    dest.on('write', (n: number) => (this.#waiting -= n));
  }

  /** pino's `streamWrite` hook: counts the line and makes sure a flush is due. */
  readonly line = (s: string): string => {
    this.#waiting += Buffer.byteLength(s);
    this.#arm();
    return s;
  };

  /** True when no flush is due (everything written, or nothing logged yet). */
  get idle(): boolean {
    return this.#timer === undefined;
  }

  #arm(): void {
    if (this.#timer) return;
    this.#timer = setTimeout(this.#tick, this.#delayMs);
    // Lines left at exit are pino's to write (it flushes synchronously then).
    this.#timer.unref();
  }

  readonly #tick = (): void => {
    this.#timer = undefined;
    if (this.#waiting <= 0) return;
    try {
      // A write in flight makes flush() a no-op; the lines behind it go on a later tick.
      this.#dest.flush();
    } catch {
      // Destroyed (the process is ending): nothing more will be written.
      return;
    }
    this.#arm();
  };
}
