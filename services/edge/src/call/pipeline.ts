import type { CompiledModel } from '@holdfast/config';
import { Err, Ok } from '@holdfast/runtime';
import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  admit,
  beforeUpstreamCount,
  refuseUncounted,
  type AdmissionDeps,
  type AdmissionRequest,
} from '../authority/admission.js';
import type { Caller } from '../request/auth.js';
import { clampMaxTokens, type Clamp } from './clamp.js';
import { EdgeError } from '../errors.js';
import { admissionHeaders, H } from '../request/headers.js';
import { Hold } from '../authority/holds.js';
import { recordRequest } from '../plugins/observability.js';
import { upstreamError } from './failure.js';
import type { LiveCall } from './in-flight.js';
import type { Asked, MinOutput, SurfaceAdapter } from './adapter.js';
import { resolveEndUser } from '../request/end-user.js';
import { badForwardedHeader, countContext, resolveModel } from './context.js';
import { countPrompt } from './count.js';
import type { CallDeps } from './deps.js';
import { forwardCall, type Admission } from './forward-call.js';
import { holdCanGrow } from './growth.js';
import { heldServiceTier } from './service-tier.js';
import { heldToolUses, type ToolUses } from './tool-uses.js';

/**
 * One call through the edge, whatever its surface (the adapter reads, counts, forwards and
 * answers in the surface's own format):
 *
 *   resolve model -> clamp -> count prompt -> admit -> forward upstream ->
 *   count output as it streams (cut at the admitted output) -> settle / release
 *
 * The call is tracked from its first step, so a client that leaves while its prompt is counted
 * or its admission is asked for is never forwarded (its hold is released, not billed). The
 * cheap checks (auth, the tenant's requests in flight on this edge, the body's size) came
 * before the body was read (routes/v1.ts). Every admitted path ends with its hold closed.
 */
export async function runCall<B>(
  deps: CallDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  adapter: SurfaceAdapter<B>,
  body: B,
): Promise<FastifyReply> {
  const caller = request.caller!;
  const live = deps.calls.start(caller.tenant, reply.raw);
  let admission: Admission | undefined;
  try {
    const asked = adapter.asked(body);
    const endUser = resolveEndUser(request.headers, caller, asked.endUser);
    if (!endUser.ok) return await adapter.sendError(request, reply, endUser.error);
    const resolved = resolveModel(deps, asked.model, adapter);
    if (!resolved.ok) return await adapter.sendError(request, reply, resolved.error);
    const model = resolved.value;
    const badHeader = badForwardedHeader(request, adapter);
    if (badHeader) return await adapter.sendError(request, reply, badHeader);
    const tier = heldServiceTier(asked.serviceTier, model, model?.api ?? adapter.apis[0]!);
    if (!tier.ok) return await adapter.sendError(request, reply, tier.error);
    const tools = heldToolUses(asked.tools, model, model?.api ?? adapter.apis[0]!);
    if (!tools.ok) return await adapter.sendError(request, reply, tools.error);
    const clamp = clampMaxTokens(asked.maxOutput, caller.tenant, caller.useCase, model);
    const tooSmall = belowLeast(adapter.minOutput?.(body), asked, clamp.maxTokens);
    if (tooSmall) return await adapter.sendError(request, reply, tooSmall);
    const call = {
      asked,
      model,
      clamp,
      adapter,
      signal: live.signal,
      endUser: endUser.value,
      serviceTier: tier.value,
      toolUses: tools.value,
    };
    // The call that stored what it names may still be closing on this edge: its close records
    // the owner.
    await deps.holds.ownersRecorded(caller.tenant.id, asked);
    // A call refused anyway costs no count (admission.ts), and no request to an upstream's
    // counting (beforeUpstreamCount).
    const asking = { deps: admissionDeps(deps, request), req: admissionRequest(caller, call) };
    const refusal = await refuseUncounted(asking.deps, asking.req);
    if (live.signal.aborted) return await endedEarly(request, reply, adapter, live);
    if (refusal) {
      Object.assign(request.audit, { model: asked.model, maxTokens: clamp.maxTokens });
      return await adapter.sendError(request, reply, refusal);
    }
    const before = beforeUpstreamCount(asking.deps, asking.req);
    const counting = countContext(deps, request, adapter, model, tier.value, live.signal, before);
    const counted = await countPrompt((b, c) => adapter.countPrompt(b, c), body, counting);
    if (live.signal.aborted) return await endedEarly(request, reply, adapter, live);
    if (!counted.ok) {
      // Refused before the upstream counted it (beforeUpstreamCount), or not countable.
      Object.assign(request.audit, { model: asked.model, maxTokens: clamp.maxTokens });
      return await adapter.sendError(request, reply, counted.error);
    }
    const promptTokens = counted.value;
    const tooLong = aboveModelCap(model, promptTokens);
    if (tooLong) return await adapter.sendError(request, reply, tooLong);
    admission = await admitCall(deps, request, reply, { ...call, promptTokens }, asking);
    if (!admission.ok) return await adapter.sendError(request, reply, admission.error);
    const { hold } = admission.value;
    if (live.signal.aborted) {
      // The call ended while it was being admitted (its client left, its team was
      // suspended): nothing reached the model.
      hold.release(live.abortedBy === 'suspended' ? 'not_forwarded' : 'client_disconnected');
      return await endedEarly(request, reply, adapter, live);
    }
    return await forwardCall(deps, request, reply, adapter, body, {
      live,
      asked,
      promptTokens,
      heldTools: tools.value,
      ...admission.value,
    });
  } finally {
    deps.calls.end(live);
    const hold = admission?.ok ? admission.value.hold : undefined;
    if (hold && !hold.closed) {
      request.log.error({ reservationId: hold.reservationId }, 'hold left open: releasing');
      hold.release('upstream_error');
    }
  }
}

/**
 * A call whose clamped output is below what it needs upstream (a token per choice, a
 * surface's own minimum) cannot be made: a 400 before anything is counted or held.
 */
function belowLeast(
  least: MinOutput | undefined,
  asked: Asked,
  maxTokens: number,
): EdgeError | undefined {
  if (maxTokens < asked.choices) {
    const message = `n=${asked.choices} choices need at least one token each, but max_tokens is ${maxTokens}.`;
    return new EdgeError({ code: 'invalid_request', message, param: 'n' });
  }
  if (least && maxTokens < least.tokens) {
    const message = `${least.why}, but this call may use at most ${maxTokens} output tokens (the use case's ceiling or what it asked for).`;
    return new EdgeError({ code: 'invalid_request', message, param: least.param });
  }
  return undefined;
}

/** A prompt counted above the model's `maxPromptTokens`: a 400 before anything is held. */
function aboveModelCap(
  model: { id: string; maxPromptTokens?: number | undefined } | undefined,
  promptTokens: number,
): EdgeError | undefined {
  const cap = model?.maxPromptTokens;
  if (!model || cap === undefined || promptTokens <= cap) return undefined;
  const message = `The prompt is counted at ${promptTokens.toLocaleString('en-US')} tokens; model ${model.id} takes at most ${cap.toLocaleString('en-US')} (its maxPromptTokens).`;
  return new EdgeError({ code: 'invalid_request', message, param: 'model' });
}

/**
 * A call ended before it was forwarded. Its client left: nothing to answer. The edge ended it
 * (its team suspended while its prompt was counted or it was admitted): the client, still
 * waiting, gets the error, never silence.
 */
function endedEarly(
  request: FastifyRequest,
  reply: FastifyReply,
  adapter: Pick<SurfaceAdapter<unknown>, 'sendError'>,
  live: LiveCall,
): FastifyReply | Promise<FastifyReply> {
  const err = upstreamError({ kind: 'aborted', why: live.abortedBy ?? 'client_disconnected' });
  if (err) return adapter.sendError(request, reply, err);
  recordRequest(request, 499, reply.elapsedTime);
  request.audit.outcome = 'client_disconnected';
  reply.hijack();
  return reply;
}

type AdmitCall = {
  asked: Asked;
  model: CompiledModel | undefined;
  clamp: Clamp;
  adapter: Pick<SurfaceAdapter<unknown>, 'name' | 'extensible'>;
  signal: AbortSignal;
  endUser: string | undefined;
  serviceTier: string;
  toolUses: ToolUses;
};

function admissionDeps(deps: CallDeps, request: FastifyRequest): AdmissionDeps {
  return {
    authority: deps.authority,
    holds: deps.holds,
    refusals: deps.refusals,
    metrics: deps.metrics,
    logger: request.log,
    timeoutMs: deps.options.admitTimeoutMs,
    suspended: (chain) => deps.calls.suspended(chain),
    ...(deps.configVersion ? { configVersion: deps.configVersion } : {}),
  };
}

/** The call's admission request, its prompt not counted yet (0). */
function admissionRequest(caller: Caller, call: AdmitCall): AdmissionRequest {
  return {
    caller,
    model: call.asked.model,
    promptTokens: 0,
    maxTokens: call.clamp.maxTokens,
    extensible: holdCanGrow(call.adapter.extensible, call.asked, call.model),
    audioInput: call.asked.audioInput === true,
    audioOutput: call.asked.audioOutput === true,
    serviceTier: call.serviceTier,
    toolUses: call.toolUses,
    api: call.adapter.name,
    signal: call.signal,
    endUser: call.endUser,
    previousResponseId: call.asked.previousResponseId,
    itemIds: call.asked.itemIds,
  };
}

async function admitCall(
  deps: CallDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  call: AdmitCall & { promptTokens: number },
  asking: { deps: AdmissionDeps; req: AdmissionRequest },
): Promise<Admission> {
  const caller = request.caller!;
  Object.assign(request.audit, {
    model: call.asked.model,
    promptTokens: call.promptTokens,
    maxTokens: call.clamp.maxTokens,
  });
  const result = await admit(asking.deps, { ...asking.req, promptTokens: call.promptTokens });
  if (!result.ok) return result;
  const a = result.value;
  const reservationId = a.metered ? a.admitted.reservationId : a.reservationId;
  request.audit.reservationId = reservationId;
  if (call.endUser) request.audit.endUser = call.endUser;
  const ref = { reservationId, tenant: caller.tenant.id, org: caller.tenant.org };
  const hold = a.metered ? a.hold : Hold.unmetered(ref);
  // The authority knew the model (it admitted the call); a snapshot that does not is stale.
  let model = call.model;
  if (!model) {
    await deps.refreshConfig();
    model = deps.config()?.models.get(call.asked.model);
  }
  if (!model) {
    hold.release('not_forwarded');
    return Err(
      new EdgeError({
        code: 'budget_authority_unavailable',
        message: 'The edge config is out of date. Retry shortly.',
      }),
    );
  }
  if (a.metered) {
    reply.headers(
      admissionHeaders({
        admitted: a.admitted,
        promptTokens: call.promptTokens,
        clamp: call.clamp,
        tenant: caller.tenant.id,
      }),
    );
  } else {
    reply.headers({
      [H.reservationId]: reservationId,
      [H.promptTokens]: String(call.promptTokens),
      [H.unmetered]: 'authority_unavailable',
    });
  }
  return Ok({
    hold,
    maxOutput: a.metered ? a.admitted.maxTokens : call.clamp.maxTokens,
    admitted: a.metered ? a.admitted : null,
    model,
  });
}
