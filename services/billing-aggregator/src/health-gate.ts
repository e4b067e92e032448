import type { Logger } from '@holdfast/runtime';

/**
 * Holds the consume loop while ClickHouse is down, so a long outage neither spins on failing
 * inserts nor pulls messages it cannot store: they wait in JetStream. `close()` after a failed
 * insert; `wait()` then probes with backoff (250 ms doubling to 5 s) until `probe` succeeds.
 */
export class HealthGate {
  readonly #probe: () => Promise<boolean>;
  readonly #logger: Logger;
  readonly #onChange: (up: boolean) => void;
  #open = true;
  #probing: Promise<void> | undefined;
  #stopped = false;

  constructor(opts: {
    probe: () => Promise<boolean>;
    logger: Logger;
    onChange?: (up: boolean) => void;
  }) {
    this.#probe = opts.probe;
    this.#logger = opts.logger;
    this.#onChange = opts.onChange ?? (() => undefined);
  }

  get isOpen(): boolean {
    return this.#open;
  }

  close(): void {
    if (!this.#open) return;
    this.#open = false;
    this.#onChange(false);
    this.#logger.warn('ClickHouse unavailable: pausing consumption until it answers');
  }

  /** Stops probing; a waiting caller is released (the service is shutting down). */
  stop(): void {
    this.#stopped = true;
  }

  async wait(): Promise<void> {
    if (this.#open || this.#stopped) return;
    this.#probing ??= this.#probeUntilUp().finally(() => (this.#probing = undefined));
    await this.#probing;
  }

  async #probeUntilUp(): Promise<void> {
    let delayMs = 250;
    const since = Date.now();
    while (!this.#stopped) {
      const up = await this.#probe().catch(() => false);
      if (up) {
        this.#open = true;
        this.#onChange(true);
        this.#logger.info({ downMs: Date.now() - since }, 'ClickHouse answers again: resuming');
        return;
      }
      await new Promise((r) => setTimeout(r, delayMs));
      delayMs = Math.min(delayMs * 2, 5_000);
    }
  }
}
