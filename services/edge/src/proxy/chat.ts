import { PassThrough } from 'node:stream';
import type { CompiledModel, UpstreamConfig } from '@holdfast/config';
import { loadTokenizer, type TokenizerName } from '@holdfast/tokenizer';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { LiveCall } from '../calls.js';
import type { EdgeError } from '../errors.js';
import { errorBody } from '../errors.js';
import { sendError } from '../plugins/errors.js';
import { recordRequest } from '../plugins/observability.js';
import type { AdmittedCall } from '../routes/admit-call.js';
import type { ChatRequest } from '../schemas/chat.js';
import { ChatAccumulator } from '../stream/accumulator.js';
import type { Failure, Opened } from '../upstream/client.js';
import { sseEvent } from '../upstream/sse.js';
import { closeFailedOpen, settleOutcome, upstreamError } from './failure.js';
import { HoldGrowth } from './growth.js';
import { parseChunk, pump, type PumpEnd } from './pump.js';

export interface ChatProxyInput {
  body: ChatRequest;
  n: number;
  promptTokens: number;
  tokenizer: TokenizerName;
  call: AdmittedCall;
}

/** What the edge sends upstream: the client's body, always streamed, with the granted max. */
function upstreamBody(
  body: ChatRequest,
  model: CompiledModel,
  n: number,
  maxTokens: number,
): Record<string, unknown> {
  const { max_tokens: _m, max_completion_tokens: _c, ...rest } = body;
  const field = body.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens';
  return {
    ...rest,
    model: model.upstreamModel ?? model.id,
    [field]: Math.max(1, Math.floor(maxTokens / n)),
    stream: true,
    stream_options: { ...body.stream_options, include_usage: true },
  };
}

export function targetsOf(app: FastifyInstance, model: CompiledModel): UpstreamConfig[] {
  const upstreams = app.configSnapshot.current?.upstreams;
  return [model.upstream, ...model.fallbackUpstreams].flatMap((id) => upstreams?.get(id) ?? []);
}

interface Run {
  app: FastifyInstance;
  request: FastifyRequest;
  reply: FastifyReply;
  input: ChatProxyInput;
  opened: Opened;
  live: LiveCall;
  acc: ChatAccumulator;
  /** Output the call may produce; past it the edge stops the upstream (exact tokenizers). */
  limit: number;
  /** adaptive mode: the hold covers less than max_tokens and grows as output arrives. */
  growth: HoldGrowth | undefined;
}

/**
 * Forwards an admitted chat call and closes its hold on every path: settle on a finished,
 * cut or abandoned stream (provider usage when reported, else the edge's count), release when
 * the upstream never took the call. The `finally` is the backstop: a hold still open there is
 * a bug, logged and released.
 */
export async function proxyChat(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
  input: ChatProxyInput,
): Promise<FastifyReply> {
  const { call, body, promptTokens } = input;
  const live = app.calls.start(request.caller!.tenant, reply.raw);
  try {
    const result = await app.upstream.open({
      path: '/chat/completions',
      body: upstreamBody(body, call.model, input.n, call.maxTokens),
      targets: targetsOf(app, call.model),
      signal: live.signal,
      stream: true,
    });
    if (!result.ok) {
      closeFailedOpen(call.hold, result.failure, result.sent, promptTokens);
      request.audit.outcome = result.failure.kind;
      return await answerFailure(request, reply, result.failure);
    }
    const counter = await loadTokenizer(input.tokenizer);
    const run: Run = {
      app,
      request,
      reply,
      input,
      opened: result.opened,
      live,
      acc: new ChatAccumulator((t) => counter.countText(t), body.stream !== true),
      limit: input.tokenizer === 'estimate' ? Infinity : call.maxTokens,
      growth: growthOf(app, call),
    };
    try {
      return body.stream === true ? await relay(run) : await collect(run);
    } finally {
      result.opened.done();
    }
  } finally {
    app.calls.end(live);
    if (!call.hold.closed) {
      request.log.error({ reservationId: call.hold.reservationId }, 'hold left open: releasing');
      call.hold.release('upstream_error');
    }
  }
}

/** A growing hold for an adaptive call whose hold covers less than its max_tokens. */
function growthOf(app: FastifyInstance, call: AdmittedCall): HoldGrowth | undefined {
  const covered = call.admitted?.coveredOutputTokens;
  if (covered === undefined || covered >= call.maxTokens) return undefined;
  return new HoldGrowth({
    authority: app.authority,
    metrics: app.metrics,
    logger: app.log,
    reservationId: call.hold.reservationId,
    tenant: call.hold.tenant,
    covered,
    maxTokens: call.maxTokens,
    timeoutMs: app.edgeOptions.admitTimeoutMs,
  });
}

/** The pump's handler, gated by the growing hold when there is one. */
function gated(run: Run, handle: (data: string) => void): (data: string) => void {
  return run.growth ? run.growth.wrap(handle, run.acc, run.opened.body, run.live) : handle;
}

/** Adds a chunk to the count; stops the upstream once it writes past the call's max. */
function take(run: Run, data: string) {
  const chunk = parseChunk(data);
  if (!chunk) {
    run.request.log.warn({ data: data.slice(0, 200) }, 'upstream sent a non-JSON event; skipped');
    return undefined;
  }
  run.acc.add(chunk);
  if (run.acc.overLimit(run.limit)) run.live.abort('output_limit');
  return chunk;
}

/** The failure of a stream that ran to its end but did not finish (no [DONE], no usage). */
function endFailure(end: PumpEnd, acc: ChatAccumulator): Failure | undefined {
  if (!end.ok) return end.failure;
  if (end.sawDone || acc.providerUsage || acc.unfinished().length === 0) return undefined;
  return { kind: 'dropped', message: 'the upstream stream ended before it finished' };
}

function settle(run: Run, failure: Failure | undefined): void {
  const usage = run.acc.usage(run.input.promptTokens);
  const outcome = failure ? settleOutcome(failure) : 'completed';
  run.input.call.hold.settle(usage, outcome);
  Object.assign(run.request.audit, {
    completionTokens: usage.completionTokens,
    outcome: failure?.kind === 'aborted' ? failure.why : outcome,
  });
  const model = run.input.call.model.id;
  run.app.metrics.tokens.inc({ kind: 'prompt', model }, usage.promptTokens);
  run.app.metrics.tokens.inc({ kind: 'completion', model }, usage.completionTokens);
}

/** Non-streaming client: read the whole upstream stream, answer one chat.completion. */
async function collect(run: Run): Promise<FastifyReply> {
  const end = await pump(
    run.opened,
    run.live,
    gated(run, (data) => void take(run, data)),
  );
  const failure = endFailure(end, run.acc);
  settle(run, failure);
  const { request, reply } = run;
  const why = failure?.kind === 'aborted' ? failure.why : undefined;
  if (failure && why !== 'output_limit' && why !== 'suspended' && why !== 'budget_exhausted') {
    return answerFailure(request, reply, failure);
  }
  // Ended early by the edge: what was generated, marked as cut at the length limit.
  if (why === 'suspended') reply.header('x-holdfast-ended', 'tenant_suspended');
  if (why === 'budget_exhausted') reply.header('x-holdfast-ended', 'budget_exhausted');
  const finish = why ? 'length' : null;
  return reply.send(run.acc.completion(run.input.body.model, run.input.promptTokens, finish));
}

/** Streaming client: pass each chunk on as it arrives (usage only when the client asked). */
async function relay(run: Run): Promise<FastifyReply> {
  const { reply, live } = run;
  const pass = new PassThrough();
  pass.on('error', () => undefined);
  reply.code(200).headers({
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    'x-accel-buffering': 'no',
  });
  void reply.send(pass);
  const wantsUsage = run.input.body.stream_options?.include_usage === true;
  const end = await pump(
    run.opened,
    live,
    gated(run, (data) => {
      const chunk = take(run, data);
      if (!chunk) return;
      if (!wantsUsage && chunk.usage && (chunk.choices ?? []).length === 0) return;
      pass.write(sseEvent(data));
    }),
    pass,
  );
  const failure = endFailure(end, run.acc);
  settle(run, failure);
  const why = failure?.kind === 'aborted' ? failure.why : undefined;
  if (why === 'client_disconnected') {
    recordRequest(run.request, 499, reply.elapsedTime);
    pass.destroy();
    return reply;
  }
  if (why === 'output_limit') closeAtLength(run, pass, wantsUsage);
  else if (why === 'budget_exhausted') {
    // The hold could not grow: end at length, then say why in a final error event.
    closeAtLength(run, pass, wantsUsage, false);
    const err = upstreamError(failure!);
    if (err) pass.write(sseEvent(JSON.stringify(errorBody(err, run.request.id))));
    run.request.audit.code = err?.code;
  } else if (failure) {
    const err = upstreamError(failure);
    if (err) pass.write(sseEvent(JSON.stringify(errorBody(err, run.request.id))));
    run.request.audit.code = err?.code;
  } else pass.write(sseEvent('[DONE]'));
  pass.end();
  return reply;
}

/** Ends a stream the edge cut at max_tokens the way a provider would: finish_reason length. */
function closeAtLength(run: Run, pass: PassThrough, wantsUsage: boolean, done = true): void {
  const base = {
    id: 'chatcmpl-holdfast',
    object: 'chat.completion.chunk',
    model: run.input.body.model,
  };
  for (const index of run.acc.unfinished()) {
    const chunk = { ...base, choices: [{ index, delta: {}, finish_reason: 'length' }] };
    pass.write(sseEvent(JSON.stringify(chunk)));
  }
  if (wantsUsage) {
    const u = run.acc.usage(run.input.promptTokens);
    const usage = {
      prompt_tokens: u.promptTokens,
      completion_tokens: u.completionTokens,
      total_tokens: u.promptTokens + u.completionTokens,
    };
    pass.write(sseEvent(JSON.stringify({ ...base, choices: [], usage })));
  }
  if (done) pass.write(sseEvent('[DONE]'));
}

/** Answers a failure before any byte reached the client (nothing, when the client is gone). */
function answerFailure(
  request: FastifyRequest,
  reply: FastifyReply,
  failure: Failure,
): FastifyReply {
  const err: EdgeError | undefined = upstreamError(failure);
  if (err) return sendError(request, reply, err);
  recordRequest(request, 499, reply.elapsedTime);
  reply.hijack();
  return reply;
}
