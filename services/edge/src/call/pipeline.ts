import type { CompiledModel, UpstreamConfig } from '@holdfast/config';
import { ModelId } from '@holdfast/events';
import type { TokenizerName } from '@holdfast/tokenizer';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { admit } from '../admission.js';
import { printable } from '../auth.js';
import { clampMaxTokens, type Clamp } from '../clamp.js';
import { EdgeError } from '../errors.js';
import { admissionHeaders, H } from '../headers.js';
import { Hold } from '../holds.js';
import { recordRequest } from '../plugins/observability.js';
import type { Asked, SurfaceAdapter } from './adapter.js';
import type { CallDeps } from './deps.js';
import { forwardCall, type Admission } from './forward-call.js';

/** The tokenizer a model is counted with; `upstream` is the upstream's own endpoint. */
export function tokenizerOf(model: CompiledModel | undefined): TokenizerName | 'upstream' {
  return model?.tokenizer ?? 'estimate';
}

/** The model's upstream, then its fallbacks, as configured. */
export function targetsOf(deps: CallDeps, model: CompiledModel): UpstreamConfig[] {
  const upstreams = deps.config()?.upstreams;
  return [model.upstream, ...model.fallbackUpstreams].flatMap((id) => upstreams?.get(id) ?? []);
}

/**
 * One call through the edge, whatever its surface (the adapter reads, counts, forwards and
 * answers in the surface's own format):
 *
 *   resolve model -> cheap checks -> clamp -> count prompt -> admit -> forward upstream ->
 *   count output as it streams (cut at the admitted output) -> settle / release
 *
 * The call is tracked from its first step, so a client that leaves while its prompt is counted
 * or its admission is asked for is never forwarded (its hold is released, not billed). The
 * expensive count runs only after the cheap checks (auth, size, the tenant's calls in flight
 * on this edge). Every admitted path ends with its hold closed.
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
    const resolved = resolveModel(deps, asked.model);
    if (!resolved.ok) return await adapter.sendError(request, reply, resolved.error);
    const model = resolved.model;
    const early = cheapChecks(deps, caller.tenant);
    if (early) return await adapter.sendError(request, reply, early);
    const clamp = clampMaxTokens(asked.maxOutput, caller.tenant, caller.useCase, model);
    if (clamp.maxTokens < asked.choices) {
      const message = `n=${asked.choices} choices need at least one token each, but max_tokens is ${clamp.maxTokens}.`;
      const err = new EdgeError({ code: 'invalid_request', message, param: 'n' });
      return await adapter.sendError(request, reply, err);
    }
    const tokenizer = tokenizerOf(model);
    const target = model ? targetsOf(deps, model)[0] : undefined;
    const promptTokens = await adapter.countPrompt(body, {
      deps,
      model,
      tokenizer: tokenizer === 'upstream' ? 'estimate' : tokenizer,
      target: tokenizer === 'upstream' ? target : undefined,
    });
    if (live.signal.aborted) return await gone(request, reply);
    admission = await admitCall(deps, request, reply, {
      asked,
      model,
      promptTokens,
      clamp,
      extensible: adapter.extensible,
      signal: live.signal,
    });
    if (!admission.ok) return await adapter.sendError(request, reply, admission.error);
    const { hold } = admission.value;
    if (live.signal.aborted) {
      // The client left while its call was being admitted: nothing reached the model.
      hold.release('client_disconnected');
      return await gone(request, reply);
    }
    return await forwardCall(deps, request, reply, adapter, body, {
      live,
      asked,
      promptTokens,
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

function resolveModel(
  deps: CallDeps,
  name: string,
): { ok: true; model: CompiledModel | undefined } | { ok: false; error: EdgeError } {
  if (!ModelId.safeParse(name).success) {
    const message = `Model "${printable(name)}" is not allowed.`;
    return {
      ok: false,
      error: new EdgeError({ code: 'model_not_allowed', message, param: 'model' }),
    };
  }
  return { ok: true, model: deps.config()?.models.get(name) };
}

/**
 * Refusals that cost nothing to decide, before a prompt is counted: the tenant already has
 * its cap of calls in flight on this edge alone (the authority checks the cap across edges).
 */
function cheapChecks(
  deps: CallDeps,
  tenant: { id: string; maxInFlight?: number | undefined },
): EdgeError | undefined {
  const cap = tenant.maxInFlight;
  // `live` itself is counted: more than the cap means the cap was already reached.
  if (cap !== undefined && deps.calls.count(tenant.id) > cap) {
    deps.metrics.earlyRefusals.inc({ code: 'concurrency_limit' });
    return new EdgeError({
      code: 'concurrency_limit',
      message: `Team ${tenant.id} already has ${cap} calls in flight (its limit). Retry when one ends.`,
      headers: { 'retry-after': '1' },
    });
  }
  return undefined;
}

/** A client that went away: nothing to answer. */
function gone(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  recordRequest(request, 499, reply.elapsedTime);
  request.audit.outcome = 'client_disconnected';
  reply.hijack();
  return reply;
}

async function admitCall(
  deps: CallDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  call: {
    asked: Asked;
    model: CompiledModel | undefined;
    promptTokens: number;
    clamp: Clamp;
    extensible: boolean;
    signal: AbortSignal;
  },
): Promise<Admission> {
  const caller = request.caller!;
  Object.assign(request.audit, {
    model: call.asked.model,
    promptTokens: call.promptTokens,
    maxTokens: call.clamp.maxTokens,
  });
  const result = await admit(
    {
      authority: deps.authority,
      holds: deps.holds,
      metrics: deps.metrics,
      logger: request.log,
      timeoutMs: deps.options.admitTimeoutMs,
    },
    {
      caller,
      model: call.asked.model,
      promptTokens: call.promptTokens,
      maxTokens: call.clamp.maxTokens,
      extensible: call.extensible,
      signal: call.signal,
    },
  );
  if (!result.ok) return result;
  const a = result.value;
  const reservationId = a.metered ? a.admitted.reservationId : a.reservationId;
  request.audit.reservationId = reservationId;
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
    return {
      ok: false,
      error: new EdgeError({
        code: 'budget_authority_unavailable',
        message: 'The edge config is out of date. Retry shortly.',
      }),
    };
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
  return {
    ok: true,
    value: {
      hold,
      maxOutput: a.metered ? a.admitted.maxTokens : call.clamp.maxTokens,
      admitted: a.metered ? a.admitted : null,
      model,
    },
  };
}
