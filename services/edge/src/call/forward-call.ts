import { PassThrough } from 'node:stream';
import type { CompiledModel } from '@holdfast/config';
import type { Admitted, Usage } from '@holdfast/events';
import type { Result } from '@holdfast/runtime';
import { loadTokenizer } from '@holdfast/tokenizer';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { LiveCall } from './in-flight.js';
import type { EdgeError } from '../errors.js';
import type { Hold } from '../authority/holds.js';
import { recordRequest } from '../plugins/observability.js';
import { printable } from '../request/auth.js';
import { untilTaken } from '../request/response-gone.js';
import { closeFailedOpen, settleOutcome, upstreamError } from './failure.js';
import { CallAborted, type Failure, type Opened, type StreamFailure } from '../upstream/client.js';
import { isRetryableStatus } from '../upstream/retry.js';
import type { SseEvent } from '../upstream/sse.js';
import type { Asked, Grant, SurfaceAdapter, Transcript } from './adapter.js';
import type { CallDeps } from './deps.js';
import { holdCanGrow, holdForRetry, HoldGrowth } from './growth.js';
import { LeaseKeeper } from './lease.js';
import { OutputMeter } from './output-meter.js';
import { forwardedHeaders, targetsOf, tokenizerOf } from './context.js';
import { fallbackClaim, retryTake } from './capacity-move.js';
import type { ToolUses } from './tool-uses.js';
import { unreportedUsage } from './unreported.js';
import { pump, type PumpEnd } from './pump.js';
import { addUsage, plainUsage } from '../surfaces/usage.js';
import { WriteBatch } from './write-batch.js';

interface AdmittedCall {
  hold: Hold;
  /** The output the call may use in all (after the clamp and shrink-to-fit). */
  maxOutput: number;
  /** null when served unmetered (failOpen). */
  admitted: Admitted | null;
  model: CompiledModel;
}

export type Admission = Result<AdmittedCall, EdgeError>;

/** An admitted call as it is forwarded: what its client asked and what it was held for. */
export type ForwardedCall = AdmittedCall & {
  live: LiveCall;
  asked: Asked;
  promptTokens: number;
  /** The uses of provider-run tools billed per use it was held for (heldToolUses). */
  heldTools: ToolUses;
};

interface Run {
  deps: CallDeps;
  request: FastifyRequest;
  reply: FastifyReply;
  adapter: SurfaceAdapter<unknown>;
  call: ForwardedCall;
  grant: Grant;
  opened: Opened;
  transcript: Transcript;
  meter: OutputMeter;
  growth: HoldGrowth | undefined;
  /** The client's body (read again only to bill a call the provider reported no usage of). */
  body: unknown;
  /**
   * What the call's earlier attempts billed: each failed inside its stream before anything
   * reached the client and was retried (undefined: none, or none billed anything).
   */
  spent: Usage | undefined;
  /** The attempts this upstream answered with an error before this one (requests it counted). */
  answered: number;
  /**
   * The reply began: an event carrying output (or the terminal one) came. Until then nothing
   * is written to a streaming client, so an error the provider sends first can be retried.
   */
  began: boolean;
  /**
   * When a streaming client gets its head whatever the reply does (epoch ms): the first
   * attempt's start plus EDGE_STREAM_HOLD_BACK_MS, for the whole call, its retries included.
   */
  headBy: number;
}

/** How one attempt's stream ended: the client answered, or a retry asked for. */
type Served =
  | { kind: 'answered'; reply: FastifyReply }
  /** An error inside the stream before it began: retried as its status; `spent`: its bill. */
  | { kind: 'retry'; failure: StreamFailure; spent: Usage | undefined };

/**
 * Forwards an admitted call and closes its hold on every path: settle on a finished, cut or
 * abandoned stream (provider usage when reported, else the edge's count), release when the
 * upstream never took the call. The edge always streams from the upstream and counts the
 * output as it passes; past the admitted output it ends the call, whatever the upstream does.
 */
export async function forwardCall<B>(
  deps: CallDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  adapter: SurfaceAdapter<B>,
  body: B,
  call: ForwardedCall,
): Promise<FastifyReply> {
  // The upstream whose capacity the admission took goes first; a fallback after it takes the
  // call's capacity there first (fallbackClaim).
  const reserved = call.hold.ref.upstream;
  const all = targetsOf(deps, call.model);
  const targets = reserved
    ? [...all.filter((t) => t.id === reserved), ...all.filter((t) => t.id !== reserved)]
    : all;
  const grant: Grant = {
    model: call.model,
    upstream: targets[0]!,
    maxOutput: call.maxOutput,
    choices: call.asked.choices,
    promptTokens: call.promptTokens,
  };
  const forwarded = adapter.upstreamBody(body, grant);
  if (forwarded.dropped.length > 0) {
    // A field's name is the client's any string: printable, it cannot make the header unwritable.
    const names = forwarded.dropped.slice(0, 20).map(printable);
    reply.header('x-holdfast-dropped-fields', names.join(', '));
  }
  // The tokens the failed attempts were billed on each upstream (its capacity keeps them).
  const billedOn = new Map<string, number>();
  // The hold back bounds the client's wait for its head over every attempt, not each: a call
  // whose attempts each fail just before it would otherwise be silent for all of them.
  let headBy: number | undefined;
  const lease = call.admitted
    ? new LeaseKeeper(deps.authority, call.hold, request.log).start(
        Date.parse(call.admitted.expiresAt),
        Date.parse(call.admitted.expiresAt) - Date.now(),
      )
    : undefined;
  try {
    const result = await deps.upstream.open({
      tenant: request.caller!.tenant.id,
      path: adapter.path,
      body: forwarded.body,
      targets,
      signal: call.live.signal,
      stream: adapter.streamUpstream,
      headers: forwardedHeaders(request, adapter),
      requestId: call.hold.reservationId,
      model: call.model,
      claim: fallbackClaim(deps, call, (id) => billedOn.get(id)),
      retryTake: retryTake(deps, call),
    });
    let attempt = result;
    // What the attempts that failed inside their streams billed (each retried on this hold).
    let spent: Usage | undefined;
    const unreported = () => unreportedUsage(call, 0, undefined, () => adapter.cacheWrites?.(body));
    // No attempt answered: the hold closed on what the attempts billed, the client told.
    const failed = (failure: Failure, sent: boolean, answered?: number) => {
      closeFailedOpen(call.hold, failure, { sent, answered }, unreported, spent);
      request.audit.outcome = failure.kind;
      return answerFailure(request, reply, adapter, failure);
    };
    for (;;) {
      if (!attempt.ok) {
        const { failure, sent, answered } = attempt.error;
        return await failed(failure, sent, answered);
      }
      const { opened, again, answered } = attempt.value;
      let outcome: Served;
      try {
        outcome = await served(opened, spent, answered);
      } catch (err) {
        // The upstream has the request: a failure of the edge's own from here on is billed as
        // a connection lost (the prompt, and what was read), never released as if nothing was
        // sent.
        if (!call.hold.closed) {
          const dropped: Failure = { kind: 'dropped', message: String(err) };
          closeFailedOpen(call.hold, dropped, { sent: true }, unreported, spent);
        }
        throw err;
      } finally {
        opened.done();
      }
      if (outcome.kind === 'answered') return await outcome.reply;
      spent = spent && outcome.spent ? addUsage(spent, outcome.spent) : (spent ?? outcome.spent);
      if (outcome.spent) {
        const tokens = outcome.spent.promptTokens + outcome.spent.completionTokens;
        billedOn.set(opened.upstream.id, (billedOn.get(opened.upstream.id) ?? 0) + tokens);
      }
      const { failure, spent: billed } = outcome;
      // Once the loop will retry (never for the attempt it gives up on): the hold grows by what
      // the failed attempt billed before the retry may use it; with no room the loop gives up
      // there, and the call ends with its error as when the retries run out (attempts told),
      // billed what the attempts billed.
      const beforeRetry = async () => {
        if (billed && !(await holdForRetry(growFor(deps, request, call), billed))) return false;
        deps.metrics.upstreamRetries.inc({
          upstream: opened.upstream.id,
          reason: `stream_${failure.status}`,
        });
        request.log.warn(
          { upstream: opened.upstream.id, status: failure.status },
          'upstream failed inside its stream before the reply began: retried',
        );
        return true;
      };
      attempt = await again(failure, beforeRetry);
    }
  } finally {
    lease?.stop();
  }

  async function served(
    opened: Opened,
    spent: Usage | undefined,
    answered: number,
  ): Promise<Served> {
    const run: Run = {
      deps,
      request,
      reply,
      adapter: adapter,
      call,
      grant: { ...grant, upstream: opened.upstream },
      opened,
      transcript: adapter.transcript(body, { ...grant, upstream: opened.upstream }),
      meter: await meterFor(deps, call.model, opened, {
        tenant: request.caller!.tenant.id,
        headers: forwardedHeaders(request, adapter),
      }),
      growth: growthOf(deps, request, call, adapter.extensible),
      body,
      spent,
      answered,
      began: false,
      headBy: (headBy ??= Date.now() + deps.options.streamHoldBackMs),
    };
    return call.asked.stream ? relay(run) : collect(run);
  }
}

/**
 * How a model's output is counted: see OutputMeter. `tokenizer: upstream` asks the upstream's
 * own count: llama-server's /tokenize, Anthropic's count_tokens (of the text as a reply).
 */
async function meterFor(
  deps: CallDeps,
  model: CompiledModel,
  opened: Opened,
  { tenant, headers }: { tenant: string; headers: Readonly<Record<string, string>> },
) {
  const t = tokenizerOf(model);
  const own = t === 'upstream' || t === 'estimate' ? undefined : await loadTokenizer(t);
  const target = opened.upstream;
  const name = model.upstreamModel ?? model.id;
  const remote =
    t !== 'upstream'
      ? undefined
      : target.api === 'anthropic'
        ? (text: string) => deps.upstream.count.replyText(target, tenant, name, text, headers)
        : (text: string) => deps.upstream.count.tokenize(target, tenant, text);
  return new OutputMeter({
    cut: own ?? (await loadTokenizer('o200k_base')),
    exact: own !== undefined,
    bill: own ?? (await loadTokenizer('estimate')),
    remote,
  });
}

/**
 * A growing hold for an adaptive call whose hold covers less than its output and can grow (one
 * that cannot was admitted with its possible overrun held apart: growing it would hold twice).
 */
function growthOf(deps: CallDeps, request: FastifyRequest, call: Run['call'], extensible: boolean) {
  if (!holdCanGrow(extensible, call.asked, call.model)) return undefined;
  const covered = call.admitted?.coveredOutputTokens;
  if (covered === undefined || covered >= call.maxOutput) return undefined;
  return new HoldGrowth({
    authority: deps.authority,
    metrics: deps.metrics,
    logger: request.log,
    hold: call.hold.ref,
    covered,
    maxTokens: call.maxOutput,
    timeoutMs: deps.options.admitTimeoutMs,
    configVersion: deps.configVersion,
  });
}

/** What holdForRetry needs of a call. */
function growFor(deps: CallDeps, request: FastifyRequest, call: Run['call']) {
  return {
    authority: deps.authority,
    metrics: deps.metrics,
    logger: request.log,
    hold: call.hold.ref,
    timeoutMs: deps.options.admitTimeoutMs,
    mode: call.admitted?.mode,
    configVersion: deps.configVersion?.() ?? 0,
    maxTokens: call.maxOutput,
    model: call.model.id,
  };
}

/**
 * The pump's handler: reads the event, counts its output, and lets it through only while the
 * call is within what it was admitted for (and what its growing hold covers). Past the
 * admitted output the call is ended (`output_limit`); a model counted without its own
 * tokenizer asks the upstream's count first, holding the stream meanwhile.
 */
function handler(run: Run, write: (forward: string) => void) {
  const { meter, call, transcript, growth } = run;
  const limit = call.maxOutput;
  const over = (): boolean | Promise<boolean> => {
    if (!meter.overLimit(limit)) return false;
    return meter.verifiable ? meter.confirmOver(limit) : true;
  };
  const pass = (forward: string | null): void | Promise<void> => {
    const gate = growth?.gate(meter, call.live);
    if (!gate) {
      if (forward) write(forward);
      return;
    }
    return gate.then(() => {
      if (!call.live.signal.aborted && forward) write(forward);
    });
  };
  const end = () => {
    run.deps.metrics.outputCuts.inc({ model: call.model.id, why: 'output_limit' });
    call.live.abort('output_limit');
  };
  // A stored response and its items: their readers on this edge wait for this call's close
  // (the owner). Only a surface whose upstream stores them has them to tell.
  const storing =
    call.admitted && (transcript.storedResponseId || transcript.storedItemIds)
      ? (id: string | undefined) => {
          if (id) run.deps.holds.storing(call.hold.ref, id);
        }
      : undefined;
  // Per event: nothing built that the event does not need (issue 14, the edge's CPU per chunk).
  return (event: SseEvent): void | Promise<void> => {
    const accepted = transcript.accept(event);
    if (!accepted) {
      run.request.log.warn({ data: event.data.slice(0, 200) }, 'unreadable upstream event');
      return;
    }
    if (storing) {
      storing(transcript.storedResponseId?.());
      for (const id of transcript.storedItemIds?.() ?? []) storing(id);
    }
    for (const t of accepted.texts) meter.add(t.choice, t.text);
    run.began ||=
      accepted.begins === true ||
      transcript.finished() ||
      accepted.texts.some((t) => t.text.length > 0);
    const cut = over();
    if (cut === false) return pass(accepted.forward);
    if (cut === true) {
      // The event that crossed the limit is passed on: what the client gets is what is billed.
      if (accepted.forward) write(accepted.forward);
      return end();
    }
    return cut.then((isOver) => {
      if (accepted.forward) write(accepted.forward);
      if (isOver) end();
    });
  };
}

/**
 * A payload the edge read but did not hand over, its call aborted meanwhile (pump's `onUnsent`):
 * the provider wrote it before it saw the hangup and bills it, so its text is counted, and a
 * usage it carries is the provider's word, as if it had been handed over. Not after the edge's
 * own cut (output limit, budget, suspension): what the client got there is what is billed, and
 * a cut never bills past the limit or the hold that made it (docs/budgets.md).
 */
function unsentCounter(run: Run) {
  const { meter, transcript, call } = run;
  return (event: SseEvent): void => {
    const reason: unknown = call.live.signal.reason;
    if (reason instanceof CallAborted && edgeCut({ kind: 'aborted', why: reason.why })) return;
    const accepted = transcript.accept(event);
    if (accepted) for (const t of accepted.texts) meter.add(t.choice, t.text);
  };
}

/**
 * How the call failed, if it did: its read failed, the provider wrote an error into the stream
 * (`streamError`: the status it stands for), or the stream ran to its end but did not
 * finish (no terminal event). A connection lost or timed out once the provider had finished
 * and reported its usage lost nothing: the client gets the answer it is billed for (a 502
 * would have it pay again for a retry). An abort (the client left, the edge cut) stays one.
 */
function endFailure(end: PumpEnd, transcript: Transcript): Failure | undefined {
  const answered = transcript.finished() && transcript.usage() !== undefined;
  if (!end.ok) {
    if (end.error.kind === 'aborted') return end.error;
    return answered ? undefined : (sentError(transcript) ?? end.error);
  }
  if (answered) return undefined;
  // An error the provider wrote into the stream before it finished fails the call, whatever
  // ends the stream (chat's `[DONE]` too).
  const sent = sentError(transcript);
  if (sent) return sent;
  // A usage reported early (as the provider goes) and content after it is no end: the stream
  // stopped mid-reply.
  const usageEnded = transcript.usage() !== undefined && (transcript.usageLast?.() ?? true);
  if (end.value.sawDone || transcript.finished() || usageEnded) return undefined;
  return { kind: 'dropped', message: 'the upstream stream ended before it finished' };
}

/** The error the provider sent in the stream, as the status it stands for. */
function sentError(transcript: Transcript): Failure | undefined {
  const e = transcript.streamError?.();
  return e && { kind: 'status', status: e.status, message: e.message, retryAfterMs: undefined };
}

/**
 * The provider refused the call in its stream before it began the reply (Messages: an `error`
 * event first, overloaded or rate-limited): it read and made nothing, as when it answers that
 * status, so nothing is billed.
 */
function refusedInStream(run: Run, failure: Failure | undefined): boolean {
  return failure?.kind === 'status' && run.transcript.streamError?.()?.beforeStart === true;
}

/**
 * An error the provider wrote into its stream before the reply began (nothing reached the
 * client), of a status the edge retries (429, 5xx, Anthropic's 529): the attempt is retried as
 * if it had answered that status. Not when the client left or the edge ended the call.
 */
function retryable(run: Run, failure: Failure | undefined): StreamFailure | undefined {
  if (run.began || failure?.kind !== 'status' || !run.transcript.streamError?.()) return undefined;
  if (run.call.live.signal.aborted || !isRetryableStatus(failure.status)) return undefined;
  return failure;
}

/**
 * What this attempt used, as the provider bills it: its usage when it reported one, else the
 * edge's count (unreportedOf); undefined when it bills nothing (an error event before the
 * provider began the reply: refusedInStream).
 */
async function attemptUsage(run: Run, failure: Failure | undefined): Promise<Usage | undefined> {
  if (refusedInStream(run, failure)) return undefined;
  const reported = run.transcript.usage();
  const usage = reported ?? (await unreportedOf(run));
  // A usage the provider reported before the call failed mid-reply (as it goes) counts only
  // what was written by then: the output streamed after it is billed too.
  if (reported && failure && !run.transcript.finished()) {
    usage.completionTokens = Math.max(usage.completionTokens, await billedOutput(run));
  }
  // Billed at the tier the provider reported (none: the tier held).
  const serviceTier = run.transcript.serviceTier?.();
  if (serviceTier) usage.serviceTier = serviceTier;
  if (reported) {
    // Provider-run tools billed per use, at the model's price.toolUses: the uses reported,
    // else those the stream showed (without a report, unreportedUsage bills the bound held).
    const toolUses = run.transcript.toolUses?.();
    if (toolUses) usage.toolUses = toolUses;
  }
  return usage;
}

/**
 * Settles what the call used (with what its earlier attempts billed), or releases the hold
 * when nothing was; returns the usage settled.
 */
async function settle(run: Run, failure: Failure | undefined): Promise<Usage> {
  const used = await attemptUsage(run, failure);
  const usage = used && run.spent ? addUsage(run.spent, used) : (used ?? run.spent);
  if (!usage) {
    // The provider answered this attempt with an error first in its stream: a request too.
    run.call.hold.release('upstream_error', run.answered + 1);
    Object.assign(run.request.audit, { completionTokens: 0, outcome: 'upstream_error' });
    return plainUsage(0, 0);
  }
  const outcome = failure ? settleOutcome(failure) : 'completed';
  // A response the upstream stored, and its output items, are the tenant's: recorded with the
  // settle.
  run.call.hold.settle(usage, outcome, {
    responseId: run.transcript.storedResponseId?.(),
    itemIds: run.transcript.storedItemIds?.(),
  });
  Object.assign(run.request.audit, {
    completionTokens: usage.completionTokens,
    outcome: failure?.kind === 'aborted' ? failure.why : outcome,
  });
  const model = run.call.model.id;
  const api = run.adapter.name;
  run.deps.metrics.tokens.inc({ kind: 'prompt', model, api }, usage.promptTokens);
  run.deps.metrics.tokens.inc({ kind: 'completion', model, api }, usage.completionTokens);
  return usage;
}

/** Why the edge ended the call early, when it did and the client should get what was made. */
function edgeCut(
  failure: Failure | undefined,
): 'output_limit' | 'suspended' | 'budget_exhausted' | undefined {
  const why = failure?.kind === 'aborted' ? failure.why : undefined;
  return why === 'output_limit' || why === 'suspended' || why === 'budget_exhausted'
    ? why
    : undefined;
}

/**
 * What to bill when the provider reported no usage: the edge's output count, and the tool uses
 * held or seen (unreported.ts; none when the provider's error event stopped it before any showed).
 */
async function unreportedOf(run: Run): Promise<Usage> {
  const output = await billedOutput(run);
  // The provider's own error event ended the attempt before the stream showed any call of a
  // tool it runs: it stopped the model, and such a tool shows its call (a Messages
  // server_tool_use block, a Responses `*_call` item) before it runs, so nothing ran to bill.
  // Once one showed, another may be under way: the bound held. A search model's one search a
  // call (`per: 'model'`) is never shown and stays billed as held.
  const seen = run.transcript.toolUses?.();
  const stopped =
    run.transcript.streamError?.() !== undefined &&
    run.call.asked.tools?.per !== 'model' &&
    (seen === undefined || Object.keys(seen).length === 0);
  return unreportedUsage(
    stopped ? { ...run.call, heldTools: {} } : run.call,
    output,
    run.transcript.inputUsage?.(),
    () => run.adapter.cacheWrites?.(run.body),
    seen,
  );
}

/**
 * The output to bill when the provider reported no usage (the call was cut or its client
 * left). Counted exactly where the edge has the model's tokenizer (or the upstream's count);
 * else the proven bound, at most the admitted output: the prompt was held at its own bound, so
 * the hold covers what the model could have billed, and a bound several times the truth would
 * otherwise bill the tenant for tokens nobody wrote (and call it an overrun).
 */
async function billedOutput(run: Run): Promise<number> {
  const counted = await run.meter.billable();
  return run.meter.exact ? counted : Math.min(counted, run.call.maxOutput);
}

/** Non-streaming client: read the whole upstream stream, answer the assembled response. */
async function collect(run: Run): Promise<Served> {
  const end = await pump(
    run.opened,
    run.call.live,
    handler(run, () => undefined),
    { asJson: (json) => run.adapter.asEvents(json), onUnsent: unsentCounter(run) },
  );
  const failure = endFailure(end, run.transcript);
  const retry = retryable(run, failure);
  if (retry) return { kind: 'retry', failure: retry, spent: await attemptUsage(run, failure) };
  const usage = await settle(run, failure);
  const { request, reply } = run;
  const cut = edgeCut(failure);
  const answered = (r: FastifyReply): Served => ({ kind: 'answered', reply: r });
  if (failure && !cut) return answered(answerFailure(request, reply, run.adapter, failure));
  if (cut === 'suspended') reply.header('x-holdfast-ended', 'tenant_suspended');
  if (cut === 'budget_exhausted') reply.header('x-holdfast-ended', 'budget_exhausted');
  if (cut === 'output_limit') reply.header('x-holdfast-ended', 'output_limit');
  return answered(reply.send(run.transcript.assemble(cut !== undefined, usage)));
}

/**
 * A streaming client that has left more than EDGE_STREAM_LAG_BYTES of its reply unread, or so
 * much that its tenant's open bytes on this edge, or every tenant's, would pass their bound
 * (EDGE_TENANT_OPEN_BODY_BYTES, EDGE_OPEN_BODY_BYTES; request/open-requests.ts): its
 * connection is closed, which ends the call as a client that left (the upstream is hung up on,
 * and what the edge read of it, all it wrote until then, is billed).
 */
function tooSlow(run: Run): void {
  const tenant = run.call.hold.ref.tenant;
  run.deps.metrics.slowClients.inc({ tenant });
  run.request.log.warn(
    { tenant, lagBytes: run.deps.options.streamLagBytes },
    'client too slow to read its stream: closing it',
  );
  run.reply.raw.destroy();
  // Ended here too: a pipelined response still waiting for its turn has no socket, and its
  // destroy() waits for one, so nothing would close and the upstream would be read, and kept,
  // to its end.
  run.call.live.abort('client_disconnected');
}

/** Streaming client: pass each event on as it arrives (what one read brings, in one write). */
async function relay(run: Run): Promise<Served> {
  const { reply, call } = run;
  // Its readable side takes every chunk at once (no high-water mark to wait for): past one,
  // node holds a chunk written in both of the stream's sides until the client reads on, and
  // counted twice in `unread` a rightful client was closed as too slow
  // (hostile.pipelined-lag.e2e). The edge bounds what waits itself (`keepsUnread`).
  const pass = new PassThrough({ readableHighWaterMark: Number.MAX_SAFE_INTEGER });
  pass.on('error', () => undefined);
  const out = new WriteBatch(pass, () => reply.raw.socket);
  // The events before the reply begins (Anthropic's message_start, a Responses
  // response.created) are held back with the response's head, so an error the provider
  // sends before the reply can still be retried, or answered with its status.
  const held: string[] = [];
  let open = false;
  const begin = () => {
    if (open) return;
    open = true;
    reply.code(200).headers({
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no',
    });
    void reply.send(pass);
    for (const event of held) out.write(event);
    held.length = 0;
  };
  // A reply that takes long to begin (hidden reasoning) gets its head anyway, so no proxy
  // between the edge and its client cuts an idle connection; from then on it is not retried.
  // A retry gets what is left of the call's hold back (none: its head goes at once).
  const holdBack = setTimeout(
    () => {
      run.began = true;
      begin();
      out.flush();
    },
    Math.max(0, run.headBy - Date.now()),
  );
  let end: PumpEnd;
  try {
    end = await pump(
      run.opened,
      call.live,
      handler(run, (forward) => {
        if (!run.began) return void held.push(forward);
        begin();
        out.write(forward);
      }),
      {
        // In the stream (both its sides) and in the response: what waits for its turn on a
        // pipelined connection, and the socket's own buffer.
        unread: () => pass.writableLength + pass.readableLength + reply.raw.writableLength,
        flush: () => out.flush(),
        asJson: (json) => run.adapter.asEvents(json),
        keepsUnread: (bytes) =>
          bytes <= run.deps.options.streamLagBytes && (run.request.open?.holdReply(bytes) ?? true),
        onLag: () => tooSlow(run),
        onUnsent: unsentCounter(run),
      },
    );
  } finally {
    clearTimeout(holdBack);
  }
  const failure = endFailure(end, run.transcript);
  const retry = retryable(run, failure);
  if (retry) return { kind: 'retry', failure: retry, spent: await attemptUsage(run, failure) };
  const usage = await settle(run, failure);
  const cut = edgeCut(failure);
  if (failure?.kind === 'aborted' && failure.why === 'client_disconnected') {
    recordRequest(run.request, 499, reply.elapsedTime);
    pass.destroy();
    if (!open) reply.hijack();
    return { kind: 'answered', reply };
  }
  // An error inside the stream before the reply began, past the retries (or one not retried):
  // nothing reached the client, so it gets the error's status, as if the upstream had answered it.
  if (!open && failure?.kind === 'status' && run.transcript.streamError?.()) {
    return { kind: 'answered', reply: answerFailure(run.request, reply, run.adapter, failure) };
  }
  begin();
  if (cut === 'output_limit' || cut === 'budget_exhausted') {
    out.write(run.transcript.endAtLength(usage));
    if (cut === 'output_limit') run.request.audit.code = 'output_limit';
  }
  const err = failure && cut !== 'output_limit' ? upstreamError(failure) : undefined;
  if (err) {
    // An error the provider sent in the stream reached the client as it came: not told twice.
    if (!run.transcript.streamError?.()) out.write(run.transcript.errorEvent(err, run.request.id));
    run.request.audit.code = err.code;
  } else if (!failure || cut === 'output_limit') out.write(run.transcript.doneEvent());
  out.end();
  // What the client has not taken yet waits in `pass`: node ends the reply only once it has.
  untilTaken(reply.raw, run.deps.options.requestTimeoutMs);
  return { kind: 'answered', reply };
}

/** Answers a failure before any byte reached the client (nothing, when the client is gone). */
function answerFailure(
  request: FastifyRequest,
  reply: FastifyReply,
  adapter: Pick<SurfaceAdapter<unknown>, 'sendError'>,
  failure: Failure,
): FastifyReply {
  const err = upstreamError(failure);
  if (err) return adapter.sendError(request, reply, err);
  recordRequest(request, 499, reply.elapsedTime);
  reply.hijack();
  return reply;
}
