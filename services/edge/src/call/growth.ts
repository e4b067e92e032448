import type { AdmissionMode, Usage } from '@holdfast/events';
import type { Asked } from './adapter.js';
import type { AuthorityPort } from './ports.js';
import type { LiveCall } from './in-flight.js';
import type { EdgeMetrics } from '../metrics.js';
import type { HoldRef } from '../authority/holds.js';
import type { OutputMeter } from './output-meter.js';

export interface GrowthOptions {
  authority: AuthorityPort;
  metrics: EdgeMetrics;
  logger: { warn(obj: object, msg: string): void };
  hold: HoldRef;
  /** Output tokens the hold covers now (the admission's coveredOutputTokens). */
  covered: number;
  /** The call's max output: the hold never needs to cover more. */
  maxTokens: number;
  timeoutMs: number;
  /** The config version this edge serves, sent with each extend (ExtendRequest.configVersion). */
  configVersion?: (() => number) | undefined;
}

/**
 * Whether a call's hold can grow with its output: its surface streams what the model writes
 * (`extensible`), and the call has no output the edge cannot see. A call that asks for
 * reasoning (or whose model reasons unasked) thinks before its first visible token and no
 * stream shows it (OpenAI's reasoning streams none; Claude's summarized thinking is billed
 * whole), and one that asks for audio is billed audio tokens, several for each token of the
 * transcript the edge reads: nothing would grow its hold as fast as the provider bills, before
 * the usage reports it. Such a call is admitted as a hold that cannot grow, its possible
 * overrun within the budget's debt (admit.lua).
 */
export function holdCanGrow(
  extensible: boolean,
  asked: Pick<Asked, 'reasoning' | 'audioOutput'>,
  model: { reasoning?: boolean } | undefined,
): boolean {
  return (
    extensible &&
    asked.reasoning !== true &&
    asked.audioOutput !== true &&
    model?.reasoning !== true
  );
}

/** Stop passing output this many tokens before the hold's cover ends, until it grows. */
const STOP_BEFORE = 16;

/**
 * Holds that grow (adaptive mode): the hold starts at prompt + an estimate of the output, and
 * the edge asks the authority to extend it before the streamed output reaches what it covers
 * (a quarter of the cover ahead, at least 64 tokens). Output is only passed on while it is
 * covered: near the end of the cover `gate` holds the stream until the extension answers. If
 * the budget cannot pay for more (or the authority does not answer), the hold stops growing
 * and the call goes on to the end of what it covers, where it is ended with
 * `budget_exhausted` (finish_reason length), so the call never bills more than its hold. Not
 * where the refusal came: that is a quarter of the cover early, and a call cut there was given
 * (and billed) up to a quarter of its hold less than it was allowed (CI: cut at 49 output
 * tokens, its hold covering 107, after an admin lowered the limit).
 */
export class HoldGrowth {
  readonly #o: GrowthOptions;
  #covered: number;
  #asking: Promise<void> | undefined;
  /** The authority refused to grow the hold (or did not answer): the cover is final. */
  #final = false;

  constructor(opts: GrowthOptions) {
    this.#o = opts;
    this.#covered = opts.covered;
  }

  get covered(): number {
    return this.#covered;
  }

  /** After output was added to the meter: undefined to go on, or a promise to wait for. */
  gate(meter: OutputMeter, live: LiveCall): Promise<void> | undefined {
    if (this.#covered >= this.#o.maxTokens || live.signal.aborted) return undefined;
    const ahead = Math.max(64, Math.floor(this.#covered / 4));
    if (!this.#asking && !this.#final && meter.overLimit(this.#covered - ahead)) {
      this.#ask(meter);
    }
    if (!this.#nearEnd(meter)) return undefined;
    return this.#wait(meter, live);
  }

  #nearEnd(meter: OutputMeter): boolean {
    return this.#covered < this.#o.maxTokens && meter.overLimit(this.#covered - STOP_BEFORE);
  }

  async #wait(meter: OutputMeter, live: LiveCall): Promise<void> {
    while (!live.signal.aborted && this.#nearEnd(meter)) {
      if (this.#final) {
        // At the end of a cover that cannot grow: the call ends here, this output held back.
        live.abort('budget_exhausted');
        return;
      }
      if (!this.#asking) this.#ask(meter);
      await this.#asking;
    }
  }

  #ask(meter: OutputMeter): void {
    const want = Math.min(this.#o.maxTokens, Math.max(this.#covered * 2, meter.counted + 256));
    const { authority, hold, timeoutMs, metrics, logger } = this.#o;
    const configVersion = this.#o.configVersion?.() ?? 0;
    const asking = authority
      .extend(
        {
          reservationId: hold.reservationId,
          tenant: hold.tenant,
          org: hold.org,
          ...(hold.keyId ? { keyId: hold.keyId } : {}),
          ...(hold.endUser ? { endUser: hold.endUser } : {}),
          outputTokens: want,
          ...(configVersion > 0 ? { configVersion } : {}),
        },
        timeoutMs,
      )
      .then((r) => {
        const status = r.ok ? r.value.status : r.error.code;
        metrics.extensions.inc({ status });
        if (r.ok && (r.value.status === 'extended' || r.value.status === 'unchanged')) {
          this.#covered = Math.max(this.#covered, r.value.coveredOutputTokens);
          return;
        }
        if (!r.ok) logger.warn({ ...hold, code: r.error.code }, 'hold extension failed');
        // No room (or no answer): the call ends at what its hold covers (#wait), not now.
        this.#final = true;
      })
      .finally(() => {
        if (this.#asking === asking) this.#asking = undefined;
      });
    this.#asking = asking;
  }
}

/**
 * Before a call is retried on its hold after an attempt that failed inside its stream and
 * billed `spent` (its prompt, read by the provider, and the provider-run tool uses it is billed
 * for): grows the hold by it on every window (ExtendRequest.billed), so the retry's prompt,
 * output and tool uses still fit what is held and the settle of both never passes a limit. true: the retry may go; false: no room (or no answer),
 * the call ends with the attempt's error. Modes that hold nothing against a limit (meter, post,
 * estimate) and unmetered calls have nothing to protect: always true.
 */
export async function holdForRetry(
  opts: Pick<GrowthOptions, 'authority' | 'metrics' | 'logger' | 'hold' | 'timeoutMs'> & {
    mode: AdmissionMode | undefined;
    configVersion: number;
    maxTokens: number;
    /** The call's model (prices the attempt's tool uses on a hold recorded without fees). */
    model?: string;
  },
  spent: Usage,
): Promise<boolean> {
  if (opts.mode !== 'reserve' && opts.mode !== 'adaptive') return true;
  const { authority, hold, metrics, logger } = opts;
  const r = await authority.extend(
    {
      reservationId: hold.reservationId,
      tenant: hold.tenant,
      org: hold.org,
      ...(hold.keyId ? { keyId: hold.keyId } : {}),
      ...(hold.endUser ? { endUser: hold.endUser } : {}),
      outputTokens: opts.maxTokens,
      billed: {
        promptTokens: spent.promptTokens,
        outputTokens: spent.completionTokens,
        ...(spent.toolUses ? { toolUses: spent.toolUses } : {}),
      },
      ...(opts.model ? { model: opts.model } : {}),
      ...(opts.configVersion > 0 ? { configVersion: opts.configVersion } : {}),
    },
    opts.timeoutMs,
  );
  const status = r.ok ? r.value.status : r.error.code;
  metrics.extensions.inc({ status });
  if (!r.ok) logger.warn({ ...hold, code: r.error.code }, 'hold growth for a retry failed');
  return r.ok && (r.value.status === 'extended' || r.value.status === 'unchanged');
}
