import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyReply } from 'fastify';
import type { Failure, OverReport } from './behaviour.js';
import type { Plan } from './plan.js';
import type { MockState, Outcome, RequestRecord, Route } from './state.js';
import { sendError, type Surface } from './surface.js';
import type { ToolUses } from './server-tools.js';
import { bill, NOTHING, type AudioCount, type Billed, type PromptCount } from './usage.js';

/** What a route knows about a call before it starts. */
export interface CallInfo extends Pick<
  RequestRecord,
  | 'model'
  | 'stream'
  | 'includeUsage'
  | 'maxTokens'
  | 'outputCap'
  | 'vendorFields'
  | 'choices'
  | 'candidates'
  | 'endUser'
> {
  route: Route;
  prompt: PromptCount;
  /** Chat calls with audio: what of the prompt is audio, and how much of the output may be. */
  audio?: AudioCount;
  /** The service tier it is served at (tiers.ts servedTier). */
  serviceTier: string;
  /** Its long-context line (plan.ts), null: none. */
  longContextAbove?: number | null;
  /** Uses of the provider-run tools billed per use it makes (server-tools.ts). */
  toolUses?: ToolUses;
}

const BILLED: readonly Outcome[] = ['completed', 'aborted', 'dropped', 'error_stream'];

/** The `x-client-request-id` a caller sent (OpenAI's correlation header), if any. */
function clientRequestId(reply: FastifyReply): string | null {
  const v = reply.request.headers['x-client-request-id'];
  return typeof v === 'string' ? v.slice(0, 128) : null;
}

function record(
  id: string,
  clientId: string | null,
  info: CallInfo,
  outcome: Outcome,
  billed: Billed,
  actualCompletion: number,
  failure: Failure | undefined,
  finishReason: string | null,
): Omit<RequestRecord, 'seq'> {
  const { prompt, audio: _audio, ...rest } = info;
  return {
    id,
    ...rest,
    clientRequestId: clientId,
    ...billed,
    actual: { promptTokens: prompt.tokens, completionTokens: actualCompletion },
    outcome,
    failure: failure?.kind ?? null,
    finishReason,
    at: new Date().toISOString(),
  };
}

/**
 * Admits a call against the account limit and starts it; or answers 429 in the surface's
 * shape (logged as `rate_limited`, nothing billed) and returns undefined. A request costs what
 * the limit counts (capacity.ts): the prompt, plus its output cap x candidates when it counts
 * `requested`. The call takes a queued failure only once it is admitted.
 */
export function startCall(
  state: MockState,
  reply: FastifyReply,
  surface: Surface,
  info: CallInfo,
  plan: Plan,
): ModelCall | undefined {
  const requested = state.capacity.counting === 'requested';
  const cost = info.prompt.tokens + (requested ? info.outputCap * info.candidates : 0);
  const admission = state.capacity.admit(cost);
  const headers = surface.rateLimitHeaders(admission.ok ? admission.value : admission.error.view);
  if (admission.ok) {
    return new ModelCall(
      state,
      reply,
      info,
      plan.failure ?? state.takeFailure(),
      surface,
      plan.overReport,
      headers,
    );
  }
  const refused = admission.error;
  const limit = refused.limit === 'tokens' ? 'tokens per min (TPM)' : 'requests per min (RPM)';
  const seconds = refused.retryAfterMs / 1000;
  const cap = refused.limit === 'tokens' ? refused.view.limitTokens : refused.view.limitRequests;
  const message =
    `Rate limit reached for ${info.model} (mock account) on ${limit}: Limit ${cap}, ` +
    `Used ${refused.used}, Requested ${refused.limit === 'tokens' ? refused.requested : 1}. ` +
    `Please try again in ${seconds.toFixed(3)}s.`;
  void sendError(
    reply.headers({
      ...headers,
      'retry-after': String(Math.ceil(seconds)),
      'retry-after-ms': String(Math.ceil(refused.retryAfterMs)),
    }),
    surface,
    'rate_limit',
    message,
    { type: refused.limit },
  );
  state.finished(
    record(
      state.requestId(),
      clientRequestId(reply),
      info,
      'rate_limited',
      NOTHING,
      0,
      undefined,
      null,
    ),
    false,
    false,
  );
  return undefined;
}

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
    readonly reply: FastifyReply,
    readonly info: CallInfo,
    readonly failure: Failure | undefined,
    readonly surface: Surface,
    private readonly overReport: OverReport,
    /** Sent with every response of the call (the account's rate-limit state). */
    readonly headers: Record<string, string>,
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

  /** The usage a provider reports (and bills) for this much output. */
  usage(completionTokens: number, reasoningTokens = 0): Billed {
    return bill(
      this.info.prompt,
      completionTokens,
      reasoningTokens,
      this.overReport,
      this.info.audio,
      this.info.serviceTier,
      this.info.longContextAbove ?? null,
      this.info.toolUses,
    );
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

  /** Starts an SSE response with the call's headers. */
  openStream(extra: Record<string, string> = {}): void {
    this.reply.hijack();
    this.reply.raw.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      ...this.headers,
      ...extra,
    });
  }

  /**
   * Answers an injected 500, 429 or overload in the surface's shape, or starts a hang (never
   * answers) or drop (destroys the socket) that happens before any byte. Returns false when the
   * request goes on normally (a stream breaks later, after its headers).
   */
  async failBeforeResponse(): Promise<boolean> {
    const f = this.failure;
    if (!f) return false;
    const surface = this.surface;
    if (f.kind === '500' || (f.kind === 'error' && !this.info.stream)) {
      await sendError(
        this.reply.headers(this.headers),
        surface,
        'server',
        'The server had an error while processing your request. (mock)',
      );
      this.finish('error_500', 0, null, false);
      return true;
    }
    if (f.kind === 'overloaded') {
      await sendError(this.reply.headers(this.headers), surface, 'overloaded', 'Overloaded (mock)');
      this.finish('error_overloaded', 0, null, false);
      return true;
    }
    if (f.kind === '429') {
      await sendError(
        this.reply.headers({
          ...this.headers,
          'retry-after': String(Math.ceil(f.retryAfterS)),
          'retry-after-ms': String(Math.round(f.retryAfterS * 1000)),
        }),
        surface,
        'rate_limit',
        'Rate limit reached for requests (mock)',
      );
      this.finish('error_429', 0, null, false);
      return true;
    }
    if (this.info.stream && f.kind !== 'hang') return false; // a stream breaks after its headers
    if (this.info.stream && f.afterTokens > 0) return false; // ... or hangs midway
    this.reply.hijack();
    if (f.kind === 'hang') await this.hang(0);
    else this.drop(0);
    return true;
  }

  /** Never answers; records the abort when the client gives up. */
  async hang(completionTokens: number, reasoningTokens = 0): Promise<void> {
    await this.closed;
    this.finish(
      this.aborted ? 'aborted' : 'dropped',
      completionTokens,
      null,
      false,
      reasoningTokens,
    );
  }

  /**
   * Destroys the socket, as a provider whose connection breaks: after what was already written
   * has reached the client (an empty socket write calls back once earlier writes are flushed).
   */
  drop(completionTokens: number, reasoningTokens = 0): void {
    this.dropped = true;
    this.finish('dropped', completionTokens, null, false, reasoningTokens);
    const socket = this.reply.raw.socket;
    if (!socket || socket.destroyed) return;
    socket.write(Buffer.alloc(0), () => socket.destroy());
  }

  /** Records the outcome once; tokens count as billed unless the request was an error. */
  finish(
    outcome: Outcome,
    completionTokens: number,
    finishReason: string | null,
    reported: boolean,
    reasoningTokens = 0,
  ): void {
    if (this.done) return;
    this.done = true;
    const billed = BILLED.includes(outcome);
    const usage = billed ? this.usage(completionTokens, reasoningTokens) : NOTHING;
    if (billed && this.state.capacity.counting === 'usage')
      this.state.capacity.addOutput(usage.completionTokens);
    this.state.finished(
      record(
        this.id,
        clientRequestId(this.reply),
        this.info,
        outcome,
        usage,
        billed ? completionTokens : 0,
        this.failure,
        finishReason,
      ),
      billed,
      reported,
    );
  }
}
