import { retry, type RetryPolicy } from '@holdfast/retry';
import type { Logger } from '@holdfast/runtime';

/** Pings ClickHouse 250 ms after the failed insert, then ever less often, up to every 5 s. */
const PROBE: RetryPolicy = { initialMs: 250, maxMs: 5_000 };

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
  readonly #stop = new AbortController();

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
    this.#stop.abort();
  }

  async wait(): Promise<void> {
    if (this.#open || this.#stop.signal.aborted) return;
    this.#probing ??= this.#probeUntilUp().finally(() => (this.#probing = undefined));
    await this.#probing;
  }

  async #probeUntilUp(): Promise<void> {
    const since = Date.now();
    try {
      await retry(() => this.#probe().catch(() => false), {
        policy: PROBE,
        retryIf: (up) => !up,
        signal: this.#stop.signal,
      });
    } catch {
      return; // stopped: the service is shutting down
    }
    this.#open = true;
    this.#onChange(true);
    this.#logger.info({ downMs: Date.now() - since }, 'ClickHouse answers again: resuming');
  }
}
