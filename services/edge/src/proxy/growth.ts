import type { AuthorityClient, Logger } from '@holdfast/runtime';
import type { Readable } from 'node:stream';
import type { LiveCall } from '../calls.js';
import type { EdgeMetrics } from '../metrics.js';
import type { ChatAccumulator } from '../stream/accumulator.js';

export interface GrowthOptions {
  authority: AuthorityClient;
  metrics: EdgeMetrics;
  logger: Pick<Logger, 'warn'>;
  reservationId: string;
  tenant: string;
  /** Output tokens the hold covers now (the admission's coveredOutputTokens). */
  covered: number;
  /** The call's max_tokens: the hold never needs to cover more. */
  maxTokens: number;
  timeoutMs: number;
}

/** Stop passing output this many tokens before the hold's cover ends, until it grows. */
const STOP_BEFORE = 16;

/**
 * Holds that grow (SPEC section 4, adaptive mode): the hold starts at prompt + an estimate of
 * the output, and the edge asks the authority to extend it before the streamed output reaches
 * what it covers (a quarter of the cover ahead, at least 64 tokens). Output is only passed on
 * while it is covered: near the end of the cover the upstream is paused and what arrives is
 * held back until the extension answers. If the budget cannot pay for more, the call is ended
 * with `budget_exhausted` (finish_reason length) and the held-back output is dropped, so the
 * call never bills more than its hold.
 */
export class HoldGrowth {
  readonly #o: GrowthOptions;
  #covered: number;
  #asking: Promise<void> | undefined;
  #waiting = false;
  #queue: string[] = [];

  constructor(opts: GrowthOptions) {
    this.#o = opts;
    this.#covered = opts.covered;
  }

  get covered(): number {
    return this.#covered;
  }

  /**
   * Wraps the pump's data handler: each payload goes through `handle` (which counts it into
   * `acc`) only while the hold covers the output; extensions are asked for ahead of need.
   */
  wrap(handle: (data: string) => void, acc: ChatAccumulator, body: Readable, live: LiveCall) {
    const max = this.#o.maxTokens;
    const nearEnd = () => this.#covered < max && acc.overLimit(this.#covered - STOP_BEFORE);
    // Paused near the end of the cover: resume once an extension covers what arrived.
    const wait = (): void => {
      if (!this.#asking) this.#ask(acc, live);
      void this.#asking?.then(() => {
        if (live.signal.aborted) return;
        if (nearEnd()) return wait();
        this.#waiting = false;
        const queued = this.#queue;
        this.#queue = [];
        for (const d of queued) step(d);
        if (!this.#waiting) body.resume();
      });
    };
    const step = (data: string): void => {
      if (this.#waiting) {
        this.#queue.push(data);
        return;
      }
      handle(data);
      if (this.#covered >= max || live.signal.aborted) return;
      const ahead = Math.max(64, Math.floor(this.#covered / 4));
      if (!this.#asking && acc.overLimit(this.#covered - ahead)) this.#ask(acc, live);
      if (nearEnd()) {
        this.#waiting = true;
        body.pause();
        wait();
      }
    };
    return step;
  }

  #ask(acc: ChatAccumulator, live: LiveCall): void {
    const want = Math.min(this.#o.maxTokens, Math.max(this.#covered * 2, acc.counted + 256));
    const { authority, reservationId, tenant, timeoutMs, metrics, logger } = this.#o;
    const asking = authority
      .extend({ reservationId, tenant, outputTokens: want }, timeoutMs)
      .then((r) => {
        const status = r.ok ? r.value.status : r.error.code;
        metrics.extensions.inc({ status });
        if (r.ok && (r.value.status === 'extended' || r.value.status === 'unchanged')) {
          this.#covered = r.value.coveredOutputTokens;
          return;
        }
        if (!r.ok) logger.warn({ reservationId, code: r.error.code }, 'hold extension failed');
        // No room (or no answer): the call ends at what its hold covers.
        live.abort('budget_exhausted');
      })
      .finally(() => {
        if (this.#asking === asking) this.#asking = undefined;
      });
    this.#asking = asking;
  }
}
