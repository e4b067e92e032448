import { setImmediate as nextTurn } from 'node:timers/promises';
import type { StreamErrorKind } from './behaviour.js';
import type { ModelCall } from './call.js';
import type { Plan } from './plan.js';

/**
 * Writes one SSE reply token by token, the same way on every surface: the first-token latency
 * once the opening events are out, the token delay between tokens, and an injected break after
 * `afterTokens` tokens (drop the socket, stall, or the surface's error event), never later than
 * the end of the content, so a short reply is cut before its closing events. Each method
 * returns false once the stream is over; the call is recorded by then. Output that is never
 * streamed (reasoning, and the `best_of` candidates not returned) counts as written once the
 * first-token latency has passed: the model produces it before the first visible token.
 */
export class TokenStream {
  /** Content tokens written so far, all choices. */
  sent = 0;
  private streamedReasoning = 0;
  private upfrontSent = { reasoning: 0, hidden: 0 };
  private readonly cutAt: number;
  /** Token delay owed and not slept yet (see `gap`). */
  private owedMs = 0;

  constructor(
    private readonly call: ModelCall,
    private readonly plan: Plan,
    /** Content tokens the whole reply has. */
    total: number,
    /**
     * The surface's error event for an injected `error` break: what it says (undefined: the
     * surface's default), and the output written until then (a `response.failed` reports it).
     */
    private readonly errorEvent: (
      kind: StreamErrorKind | undefined,
      written: { output: number; reasoning: number },
    ) => string,
    private readonly upfront = { reasoning: 0, hidden: 0 },
  ) {
    const f = call.failure;
    const cuts = f?.kind === 'drop' || f?.kind === 'hang' || f?.kind === 'error';
    this.cutAt = cuts ? Math.min(f.afterTokens, total) : -1;
  }

  /** An event that is not a content token. */
  async event(data: string): Promise<boolean> {
    return (await this.call.write(data)) || this.aborted();
  }

  /** The first-token latency, after the opening events. */
  async begin(): Promise<boolean> {
    if (!(await this.call.wait(this.plan.firstTokenLatencyMs))) return this.aborted();
    this.upfrontSent = this.upfront;
    return true;
  }

  /** A pause in the reply (a provider-run tool at work); false when the client left. */
  async pause(ms: number): Promise<boolean> {
    return (await this.call.wait(ms)) || this.aborted();
  }

  /**
   * One content token (or a chunk worth `tokens` of them); `reasoning` for streamed thinking
   * (Anthropic), which is output billed as reasoning.
   */
  async token(data: string, tokens = 1, reasoning = false): Promise<boolean> {
    if (!(await this.checkpoint())) return false;
    if (this.sent > 0 && !(await this.gap())) return this.aborted();
    if (!(await this.call.write(data))) return this.aborted();
    this.sent += tokens;
    if (reasoning) this.streamedReasoning += tokens;
    return true;
  }

  /**
   * The token delay before a token. One under a timer's 1 ms is kept on average: it is owed
   * until a whole millisecond is, then slept, and a token meanwhile waits one turn of the event
   * loop, so a reader in the same process still takes each token on its own and a hangup is
   * seen before the next. Before, node made every delay under 1 ms a 1 ms timer, and a loaded
   * box makes each several: a 200,000-token reply meant as a fast provider took minutes.
   */
  private async gap(): Promise<boolean> {
    const ms = this.plan.tokenDelayMs;
    if (ms <= 0 || ms >= 1) return this.call.wait(ms);
    this.owedMs += ms;
    if (this.owedMs < 1) {
      await nextTurn();
      return !this.call.aborted;
    }
    const whole = Math.floor(this.owedMs);
    this.owedMs -= whole;
    return this.call.wait(whole);
  }

  /** Where the content of a choice or block ends: an injected break due now happens here. */
  async checkpoint(): Promise<boolean> {
    if (this.cutAt < 0 || this.sent < this.cutAt) return true;
    const kind = this.call.failure?.kind;
    const { output, reasoning } = this.written;
    if (kind === 'drop') this.call.drop(output, reasoning);
    else if (kind === 'hang') await this.call.hang(output, reasoning);
    else {
      await this.call.write(this.errorEvent(this.call.failure?.streamError, this.written));
      this.call.finish('error_stream', output, null, false, reasoning);
      this.end();
    }
    return false;
  }

  /** The stream ended in full. */
  complete(finishReason: string, reported: boolean): void {
    this.end();
    const { output, reasoning } = this.written;
    this.call.finish('completed', output, finishReason, reported, reasoning);
  }

  /** All output that counts as written so far (streamed and upfront), and its reasoning part. */
  get written(): { output: number; reasoning: number } {
    const { reasoning, hidden } = this.upfrontSent;
    return {
      output: this.sent + reasoning + hidden,
      reasoning: reasoning + this.streamedReasoning,
    };
  }

  private end(): void {
    const res = this.call.reply.raw;
    if (!res.destroyed) res.end();
  }

  private aborted(): false {
    const { output, reasoning } = this.written;
    this.call.finish('aborted', output, null, false, reasoning);
    return false;
  }
}
