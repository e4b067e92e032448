import type { IncomingHttpHeaders } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CompiledModel, UpstreamConfig } from '@holdfast/config';
import { Err, Ok, type Logger, type Result } from '@holdfast/runtime';
import { Agent, request, type Dispatcher } from 'undici';
import type { UpstreamRetry, UpstreamTimeouts } from '../env.js';
import type { EdgeMetrics } from '../metrics.js';
import { AttemptSignal, type Fired } from './attempt-signal.js';
import { upstreamErrorMessage, UpstreamCounter, type UpstreamCounterOptions } from './counting.js';
import { surfaceBase, upstreamHeaders } from './endpoint.js';
import { OriginShares } from './origin-shares.js';
import {
  isRetryableStatus,
  limitsSeen,
  retryAfterMs,
  retryDelayMs,
  type LimitsSeen,
} from './retry.js';

/** Why the edge itself ended a call early. */
export type AbortWhy = 'client_disconnected' | 'suspended' | 'output_limit' | 'budget_exhausted';

/** The reason an edge-side abort carries. */
export class CallAborted extends Error {
  constructor(readonly why: AbortWhy) {
    super(`call aborted: ${why}`);
    this.name = 'CallAborted';
  }
}

/** One attempt's whole-call deadline (the upstream's `timeoutMs`). */
class DeadlineExceeded extends Error {
  constructor(readonly ms: number) {
    super(`upstream call took longer than ${ms} ms`);
    this.name = 'DeadlineExceeded';
  }
}

/**
 * How an upstream call failed. `status` and `connect` failures cost nothing (the provider
 * refused or never got the request); after `timeout` and `dropped` the provider may have read
 * the prompt, so the edge never retries those and settles what may have been used.
 */
export type Failure =
  | {
      kind: 'status';
      status: number;
      message: string;
      retryAfterMs: number | undefined;
      /** Set on the call's last failure: what the edge did before giving up. */
      retries?: RetryStory;
    }
  | { kind: 'connect'; message: string }
  | { kind: 'timeout'; message: string }
  | { kind: 'dropped'; message: string }
  | { kind: 'aborted'; why: AbortWhy }
  /** The tenant held its share of the upstream's connections (origin-shares.ts); nothing sent. */
  | { kind: 'busy'; message: string };

/** What the edge did about 429/5xx answers before it gave up, for the client's error. */
export interface RetryStory {
  attempts: number;
  /** Backoff waited between the attempts, in all. */
  waitedMs: number;
  /**
   * Why it stopped: every retry used, a Retry-After longer than it waits (EDGE_RETRY_AFTER_CAP_MS),
   * an upstream set to no retries (maxRetries: 0), or one with no request of its declared
   * capacity left for a retry (`capacity`).
   */
  stop: 'retries' | 'retry_after' | 'no_retries' | 'capacity';
  retryAfterCapMs: number;
  /** The upstreams tried, in order. */
  upstreams: string[];
}

export interface Opened {
  upstream: UpstreamConfig;
  status: number;
  headers: IncomingHttpHeaders;
  body: Dispatcher.ResponseData['body'];
  /** Fired when this attempt's deadline passes (or the call is aborted). */
  signal: Fired;
  /** Stops this attempt's deadline timer; call once the body is consumed. */
  done(): void;
}

/** Why a call could not be opened: its last failure (`kind` is the code), and on which upstream. */
interface OpenFailure {
  failure: Failure;
  /** The provider may have read the prompt (the edge settles what may have been used). */
  sent: boolean;
  attempts: number;
  upstream: string;
  /**
   * The attempts `upstream` answered with an error (a status, or one first in its stream):
   * requests its account counted, which a release keeps in its capacity.
   */
  answered?: number;
}

/** What a limits report needs of a call's model. */
export type LimitedModel = Pick<CompiledModel, 'id' | 'upstream' | 'capacity'>;

/** An error the upstream wrote into its 200 stream, as the status it stands for. */
export type StreamFailure = Extract<Failure, { kind: 'status' }>;

export type OpenResult = Result<
  {
    opened: Opened;
    attempts: number;
    /** The attempts the opened upstream answered with an error before this one. */
    answered: number;
    /**
     * The opened stream failed with an error inside it before anything reached the client:
     * goes on as if this attempt had answered that status (a retry after backoff on the same
     * upstream, then its fallbacks; the same attempts in all), or gives up with it.
     * `beforeRetry` runs once the loop knows it will try again (before the backoff, or before
     * a fallback is claimed), never when it gives up; false gives up there, with the same
     * failure (and attempts told) as when the retries run out.
     */
    again: (failure: StreamFailure, beforeRetry?: BeforeRetry) => Promise<OpenResult>;
  },
  OpenFailure
>;

/** Whether a retry may go (the call's hold grew for it): false gives up. */
type BeforeRetry = () => Promise<boolean>;

/** One attempt: the response opened, or how it failed and whether the request went out. */
type AttemptResult = Result<Opened, { failure: Failure; sent: boolean }>;

export interface UpstreamCall {
  /** Whose call: each tenant may hold at most its share of an origin's connections. */
  tenant: string;
  path: string;
  body: Record<string, unknown>;
  /** The model's upstream, then its fallbacks. */
  targets: readonly UpstreamConfig[];
  /** Aborted by the edge (client gone, tenant suspended, output limit). */
  signal: AbortSignal;
  stream: boolean;
  /** Client headers the surface forwards (`anthropic-version`, `anthropic-beta`). */
  headers?: Readonly<Record<string, string>>;
  /**
   * The call's model: a provider's word on its limits is about this model's where the model
   * declares a capacity of its own on the upstream (OpenAI's limits are per model).
   */
  model?: LimitedModel;
  /**
   * Asked before the call goes on to an upstream after its first (a fallback): whether it may.
   * An admitted call takes its capacity of the fallback first (call/capacity-move.ts); false
   * skips that upstream. `answered`: the upstreams that answered the call's attempts with an
   * error status so far (their accounts counted the requests).
   */
  claim?: (target: UpstreamConfig, answered: ReadonlySet<string>) => Promise<boolean>;
  /**
   * Asked before a retry on the same upstream after the provider answered an attempt there (a
   * 429/5xx, or an error inside its stream): its account counted that request, so an admitted
   * call takes one more of the upstream's declared requests (capacity.retry); false: no room,
   * no retry there (the call goes on to a fallback, or fails, as when the upstream is full).
   */
  retryTake?: (target: UpstreamConfig) => Promise<boolean>;
  /**
   * Sent as `x-client-request-id` (OpenAI's correlation header): the reservation id, so a
   * provider's logs and Holdfast's books can be matched call by call.
   */
  requestId?: string;
}

export interface UpstreamClientOptions {
  logger: Logger;
  metrics: EdgeMetrics;
  timeouts: UpstreamTimeouts;
  retry: UpstreamRetry;
  /** Where upstream API keys are read (`apiKeyEnv`); process.env in production. */
  env: NodeJS.ProcessEnv;
  /**
   * Told what an upstream with a declared capacity said of its limits: every 429 (with its
   * Retry-After), and the tokens it says it has left on a response, so the gateway stops
   * sending what the provider would refuse.
   */
  onLimits?: (upstream: UpstreamConfig, seen: LimitsSeen, model?: LimitedModel) => void;
  /** Connections to each upstream origin (EDGE_UPSTREAM_CONNECTIONS). */
  connections: number;
  /** The share of them one tenant's calls may hold at once, (0, 1] (EDGE_UPSTREAM_TENANT_SHARE_PERCENT). */
  tenantShare: number;
  /** Takes one of the tenant's share of an upstream's `countsPerMinute` (UpstreamCounter). */
  takeCount?: UpstreamCounterOptions['takeCount'];
}

const CONNECT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);

function errorCode(err: unknown): string | undefined {
  const e = err as { code?: unknown; cause?: { code?: unknown } };
  const code = typeof e.code === 'string' ? e.code : e.cause?.code;
  return typeof code === 'string' ? code : undefined;
}

/** Upstreams (OpenAI-compatible, Anthropic) over one undici agent: timeouts, retries, fallbacks. */
export class UpstreamClient {
  readonly #o: UpstreamClientOptions;
  readonly #agent: Agent;
  readonly #count: UpstreamCounter;
  readonly #shares: OriginShares;
  /** Each upstream's origin (the pool its calls share), by its config. */
  readonly #origins = new WeakMap<UpstreamConfig, string>();

  constructor(opts: UpstreamClientOptions) {
    this.#o = opts;
    this.#agent = new Agent({
      connect: { timeout: opts.timeouts.connectTimeoutMs },
      keepAliveTimeout: 10_000,
      connections: opts.connections,
    });
    this.#shares = new OriginShares(Math.max(1, Math.floor(opts.connections * opts.tenantShare)));
    this.#count = new UpstreamCounter({
      agent: this.#agent,
      env: opts.env,
      logger: opts.logger,
      take: (tenant, target) => this.#takeConnection(tenant, target, surfaceBase(target, opts.env)),
      onBusy: (tenant) => opts.metrics.upstreamShareRefusals.inc({ tenant }),
      onLimited: (upstream) => opts.metrics.upstreamCountsLimited.inc({ upstream }),
      ...(opts.takeCount ? { takeCount: opts.takeCount } : {}),
    });
  }

  close(): Promise<void> {
    return this.#agent.close();
  }

  /** The upstreams' counting endpoints, over the same agent. */
  get count(): UpstreamCounter {
    return this.#count;
  }

  /**
   * Sends the call to its upstream until one answers 2xx: each upstream gets 1 + maxRetries
   * attempts on 429/5xx/connect failures, with backoff and jitter, waiting at least what a
   * Retry-After asks (one longer than the cap moves on to the next upstream at once).
   */
  async open(call: UpstreamCall): Promise<OpenResult> {
    const started = performance.now();
    const result = await this.#open(call);
    const upstream = result.ok ? result.value.opened.upstream.id : result.error.upstream;
    const outcome = result.ok ? 'ok' : result.error.failure.kind;
    const seconds = (performance.now() - started) / 1_000;
    this.#o.metrics.upstreamDuration.observe({ upstream, outcome }, seconds);
    return result;
  }

  async #open(
    call: UpstreamCall,
    loop = new RetryLoop(this.#o.retry.retryAfterCapMs),
  ): Promise<OpenResult> {
    // A loop resumed after an error the upstream sent inside its 200 stream: that attempt's
    // failure is handled as if it had come as its status, on the same upstream and budget.
    let pending = loop.resumeWith;
    loop.resumeWith = undefined;
    // Asked once, when the loop is sure to try again after that failure.
    let beforeRetry = loop.beforeRetry;
    loop.beforeRetry = undefined;
    const mayRetry = async (): Promise<boolean> => {
      const ask = beforeRetry;
      beforeRetry = undefined;
      return !ask || (await ask());
    };
    const givenUp = (): OpenResult =>
      Err({ ...loop.told(), sent: false, attempts: loop.attempts, ...loop.answeredOn() });
    for (; loop.target < call.targets.length; loop.target++, loop.retry = 0, loop.entered = false) {
      const target = call.targets[loop.target]!;
      if (!loop.entered) {
        // A call ended meanwhile (its client left while an in-stream retry's hold grew) takes
        // nothing of a fallback: capacity.move would hold it there for a call never sent.
        if (loop.target > 0 && call.signal.aborted) {
          const aborted = abortedFailure(call.signal, target.id);
          return Err({ ...aborted, sent: false, attempts: loop.attempts, ...loop.answeredOn() });
        }
        if (!(await mayRetry())) return givenUp();
        if (loop.target > 0 && call.claim && !(await call.claim(target, loop.answered))) continue;
        loop.entered = true;
        loop.story.upstreams.push(target.id);
      }
      for (; loop.retry <= target.maxRetries; loop.retry++) {
        let f: Failure;
        if (pending) {
          f = pending;
          pending = undefined;
        } else {
          loop.attempts++;
          const result = await this.#attempt(call, target);
          if (result.ok) {
            const again = (failure: StreamFailure, before?: BeforeRetry) => {
              loop.resumeWith = failure;
              loop.beforeRetry = before;
              loop.last = { failure, upstream: target.id };
              return this.#open(call, loop);
            };
            const answered = loop.answersOn(target.id);
            return Ok({ opened: result.value, attempts: loop.attempts, answered, again });
          }
          loop.last = { failure: result.error.failure, upstream: target.id };
          if (result.error.sent || result.error.failure.kind === 'aborted') {
            const { sent } = result.error;
            return Err({ ...loop.last, sent, attempts: loop.attempts, ...loop.answeredOn() });
          }
          f = result.error.failure;
        }
        // The provider answered it (a 429 or 5xx, or such an error first in its stream): its
        // account counted the request.
        if (f.kind === 'status') loop.answer(target.id);
        if (f.kind === 'status' && !isRetryableStatus(f.status)) {
          return Err({ ...loop.last!, sent: false, attempts: loop.attempts, ...loop.answeredOn() });
        }
        // The tenant's share of this upstream frees only as its own calls end: the next one.
        if (f.kind === 'busy') break;
        if (loop.retry === target.maxRetries) {
          loop.story.stop = target.maxRetries === 0 ? 'no_retries' : 'retries';
          break;
        }
        const asked = f.kind === 'status' ? f.retryAfterMs : undefined;
        const delay = retryDelayMs(loop.retry, asked, this.#o.retry);
        if (delay === undefined) {
          loop.story.stop = 'retry_after';
          break;
        }
        if (!(await mayRetry())) return givenUp();
        const reason = f.kind === 'status' ? String(f.status) : 'connect';
        this.#o.metrics.upstreamRetries.inc({ upstream: target.id, reason });
        loop.story.waitedMs += delay;
        try {
          await sleep(delay, undefined, { signal: call.signal });
        } catch {
          const aborted = abortedFailure(call.signal, target.id);
          return Err({ ...aborted, sent: false, attempts: loop.attempts, ...loop.answeredOn() });
        }
        // Taken after the wait (a Retry-After's block of the upstream is over by then): the
        // request the provider answered was counted, the retry is another.
        if (f.kind === 'status' && call.retryTake && !(await call.retryTake(target))) {
          loop.story.stop = 'capacity';
          break;
        }
      }
    }
    if (!loop.last) throw new Error('model has no upstream');
    return givenUp();
  }

  async #attempt(call: UpstreamCall, target: UpstreamConfig): Promise<AttemptResult> {
    const { logger, metrics, timeouts, env } = this.#o;
    // A call ended before this attempt (its client left while the fallback was claimed) is not
    // sent: the attempt's signal follows the call's only from here (an abort before never
    // fires), and the pump drops every event of an aborted call, so the upstream's whole reply
    // would go unbilled.
    if (call.signal.aborted) {
      return Err({ sent: false, failure: abortedFailure(call.signal, target.id).failure });
    }
    // This attempt's signal: aborted by the call's, or by the attempt's own deadline.
    const signal = new AttemptSignal();
    const onCallAbort = () => signal.abort(call.signal.reason);
    call.signal.addEventListener('abort', onCallAbort, { once: true });
    const timer = setTimeout(
      () => signal.abort(new DeadlineExceeded(target.timeoutMs)),
      target.timeoutMs,
    );
    const done = () => {
      clearTimeout(timer);
      call.signal.removeEventListener('abort', onCallAbort);
    };
    const base = surfaceBase(target, env);
    const giveBack = this.#takeConnection(call.tenant, target, base);
    if (!giveBack) {
      done();
      metrics.upstreamShareRefusals.inc({ tenant: call.tenant });
      const message = `Team ${call.tenant} already has ${this.#shares.perTenant} calls open to upstream ${target.id} on this edge (its share of the edge's connections to it).`;
      return Err({ sent: false, failure: { kind: 'busy', message } });
    }
    const url = `${base}${call.path}`;
    const headers: Record<string, string> = {
      ...upstreamHeaders(target, env, call.headers),
      accept: call.stream ? 'text/event-stream' : 'application/json',
      'user-agent': 'holdfast-edge',
    };
    if (call.requestId) headers['x-client-request-id'] = call.requestId;
    logger.debug({ upstream: target.id, url, headers }, 'upstream request');
    const started = performance.now();
    const seconds = () => (performance.now() - started) / 1_000;
    try {
      const res = await request(url, {
        method: 'POST',
        headers,
        body: JSON.stringify(call.body),
        signal,
        dispatcher: this.#agent,
        headersTimeout: timeouts.firstByteTimeoutMs,
        bodyTimeout: timeouts.idleTimeoutMs,
      });
      metrics.upstreamFirstByte.observe(
        { upstream: target.id, outcome: String(res.statusCode) },
        seconds(),
      );
      // The model's own capacity on this upstream, when it declares one: what the provider
      // says is about that model's limit, not the upstream's every other model shares.
      const own =
        call.model?.capacity && call.model.upstream === target.id ? call.model : undefined;
      if ((target.capacity || own) && this.#o.onLimits) {
        const seen =
          res.statusCode === 429
            ? { ...limitsSeen(res.headers), retryAfterMs: retryAfterMs(res.headers) ?? 1_000 }
            : limitsSeen(res.headers);
        if (seen) this.#o.onLimits(target, seen, own);
      }
      if (res.statusCode >= 200 && res.statusCode < 300) {
        // The connection is the call's until its body is read or dropped.
        res.body.once('close', giveBack);
        return Ok({
          upstream: target,
          status: res.statusCode,
          headers: res.headers,
          body: res.body,
          signal,
          done: () => {
            done();
            giveBack();
          },
        });
      }
      const message = await upstreamErrorMessage(res.body);
      done();
      giveBack();
      logger.warn(
        { upstream: target.id, status: res.statusCode, message },
        'upstream refused the call',
      );
      return Err({
        sent: false,
        failure: {
          kind: 'status',
          status: res.statusCode,
          message,
          retryAfterMs: retryAfterMs(res.headers),
        },
      });
    } catch (err) {
      done();
      giveBack();
      const failure = classify(err, call.signal, signal);
      metrics.upstreamFirstByte.observe({ upstream: target.id, outcome: failure.kind }, seconds());
      logger.warn({ upstream: target.id, failure }, 'upstream attempt failed');
      return Err({ failure, sent: failure.kind !== 'connect' });
    }
  }

  /** One of the origin's connections for the tenant, or undefined at its share. */
  #takeConnection(tenant: string, target: UpstreamConfig, base: string): (() => void) | undefined {
    let origin = this.#origins.get(target);
    if (origin === undefined) this.#origins.set(target, (origin = new URL(base).origin));
    return this.#shares.take(origin, tenant);
  }
}

/** Where a call's attempts are: which upstream, which retry, and what they did so far. */
class RetryLoop {
  target = 0;
  retry = 0;
  /** The current upstream was claimed and named in the story. */
  entered = false;
  /** The upstreams that answered an attempt with an error status (capacity.move keeps it). */
  readonly answered = new Set<string>();
  /** How many attempts each of them answered so (a release keeps that many requests). */
  readonly #answers = new Map<string, number>();
  attempts = 0;
  last: { failure: Failure; upstream: string } | undefined;
  /** The failure of an opened stream, handled first when the loop goes on (`again`). */
  resumeWith: Failure | undefined;
  /** Asked before the loop tries again after `resumeWith` (`again`'s `beforeRetry`). */
  beforeRetry: BeforeRetry | undefined;
  readonly story: RetryStory;

  constructor(retryAfterCapMs: number) {
    this.story = { attempts: 0, waitedMs: 0, stop: 'retries', retryAfterCapMs, upstreams: [] };
  }

  /** An attempt on `upstream` was answered with an error status. */
  answer(upstream: string): void {
    this.answered.add(upstream);
    this.#answers.set(upstream, (this.#answers.get(upstream) ?? 0) + 1);
  }

  /** The attempts `upstream` answered with an error status so far. */
  answersOn(upstream: string): number {
    return this.#answers.get(upstream) ?? 0;
  }

  /** OpenFailure's `answered`: the attempts the last upstream tried answered (none: absent). */
  answeredOn(): { answered?: number } {
    const n = this.last ? this.answersOn(this.last.upstream) : 0;
    return n > 0 ? { answered: n } : {};
  }

  /** The call's last failure, with the story of its retries when the upstream refused it. */
  told(): { failure: Failure; upstream: string } {
    const l = this.last!;
    return l.failure.kind === 'status'
      ? { ...l, failure: { ...l.failure, retries: { ...this.story, attempts: this.attempts } } }
      : l;
  }
}

function abortedFailure(
  signal: AbortSignal,
  upstream: string,
): { failure: Failure; upstream: string } {
  const why = signal.reason instanceof CallAborted ? signal.reason.why : 'client_disconnected';
  return { failure: { kind: 'aborted', why }, upstream };
}

/**
 * What went wrong with an attempt, from the error and which signal (if any) fired: the call's
 * (the edge ended it) or the attempt's (its deadline, when the call's did not fire).
 */
export function classify(err: unknown, callSignal: AbortSignal, attempt: Fired): Failure {
  if (callSignal.aborted) {
    const why =
      callSignal.reason instanceof CallAborted ? callSignal.reason.why : 'client_disconnected';
    return { kind: 'aborted', why };
  }
  const message = err instanceof Error ? err.message : String(err);
  if (attempt.aborted) return { kind: 'timeout', message: (attempt.reason as Error).message };
  const code = errorCode(err);
  if (code !== undefined && CONNECT_CODES.has(code)) return { kind: 'connect', message };
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return { kind: 'timeout', message };
  }
  return { kind: 'dropped', message };
}
