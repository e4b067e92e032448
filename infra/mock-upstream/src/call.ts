import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyReply } from 'fastify';
import type { Failure } from './behaviour.js';
import { errorBody, type FinishReason } from './openai.js';
import type { MockState, Outcome, RequestRecord } from './state.js';

type CallInfo = Pick<
  RequestRecord,
  'route' | 'model' | 'stream' | 'includeUsage' | 'maxTokens' | 'promptTokens'
>;

/**
 * One model request in flight: watches for the client going away, applies injected failures,
 * and records the outcome exactly once.
 */
export class ModelCall {
  readonly id: string;
  /** The client closed the connection before the response was complete. */
  aborted = false;
  private dropped = false;
  private done = false;
  private readonly controller = new AbortController();
  private readonly closed: Promise<void>;

  constructor(
    private readonly state: MockState,
    private readonly reply: FastifyReply,
    private readonly info: CallInfo,
    readonly failure: Failure | undefined,
  ) {
    this.id = state.requestId();
    state.started(failure);
    const res = reply.raw;
    this.closed = new Promise((resolve) => {
      res.once('close', () => {
        if (!res.writableFinished && !this.dropped) this.aborted = true;
        this.controller.abort();
        resolve();
      });
    });
  }

  get promptTokens(): number {
    return this.info.promptTokens;
  }

  /** Waits; false when the client left meanwhile. */
  async wait(ms: number): Promise<boolean> {
    if (ms > 0 && !this.aborted) {
      await sleep(ms, undefined, { signal: this.controller.signal }).catch(() => undefined);
    }
    return !this.aborted;
  }

  /** Writes to the raw response, waiting for the socket to drain; false when the client left. */
  async write(data: string): Promise<boolean> {
    const res = this.reply.raw;
    if (this.aborted || res.destroyed) return false;
    if (!res.write(data)) await Promise.race([once(res, 'drain'), this.closed]);
    return !this.aborted;
  }

  /**
   * Answers an injected 500 or 429, or starts a hang (never answers) or drop (destroys the
   * socket) that happens before any byte. Returns false when the request goes on normally.
   */
  async failBeforeResponse(): Promise<boolean> {
    const f = this.failure;
    if (!f) return false;
    if (f.kind === '500') {
      await this.reply
        .code(500)
        .send(
          errorBody(
            'The server had an error while processing your request. (mock)',
            'server_error',
          ),
        );
      this.finish('error_500', 0, null, false);
      return true;
    }
    if (f.kind === '429') {
      await this.reply
        .code(429)
        .header('retry-after', String(Math.ceil(f.retryAfterS)))
        .header('retry-after-ms', String(Math.round(f.retryAfterS * 1000)))
        .send(
          errorBody('Rate limit reached for requests (mock)', 'requests', 'rate_limit_exceeded'),
        );
      this.finish('error_429', 0, null, false);
      return true;
    }
    if (this.info.stream && f.kind !== 'hang') return false; // a stream drops after its headers
    if (this.info.stream && f.afterTokens > 0) return false; // ... or hangs midway
    this.reply.hijack();
    if (f.kind === 'hang') await this.hang(0);
    else this.drop(0);
    return true;
  }

  /** Never answers; records the abort when the client gives up. */
  async hang(completionTokens: number): Promise<void> {
    await this.closed;
    this.finish(this.aborted ? 'aborted' : 'dropped', completionTokens, null, false);
  }

  /**
   * Destroys the socket, as a provider whose connection breaks: after what was already written
   * has reached the client (an empty socket write calls back once earlier writes are flushed).
   */
  drop(completionTokens: number): void {
    this.dropped = true;
    this.finish('dropped', completionTokens, null, false);
    const socket = this.reply.raw.socket;
    if (!socket || socket.destroyed) return;
    socket.write(Buffer.alloc(0), () => socket.destroy());
  }

  /** Records the outcome once; tokens count as billed unless the request was an error. */
  finish(
    outcome: Outcome,
    completionTokens: number,
    finishReason: FinishReason | null,
    reported: boolean,
  ): void {
    if (this.done) return;
    this.done = true;
    const billed = outcome === 'completed' || outcome === 'aborted' || outcome === 'dropped';
    this.state.finished(
      {
        id: this.id,
        ...this.info,
        completionTokens,
        outcome,
        failure: this.failure?.kind ?? null,
        finishReason,
        at: new Date().toISOString(),
      },
      billed,
      reported,
    );
  }
}
