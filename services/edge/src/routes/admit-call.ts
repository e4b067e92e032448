import type { CompiledModel } from '@holdfast/config';
import { ModelId, type Admitted } from '@holdfast/events';
import type { Result } from '@holdfast/runtime';
import type { TokenizerName } from '@holdfast/tokenizer';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { admit } from '../admission.js';
import { printable } from '../auth.js';
import type { Clamp } from '../clamp.js';
import { EdgeError } from '../errors.js';
import { admissionHeaders, H } from '../headers.js';
import { Hold } from '../holds.js';

/** The model a request names: its config (undefined when unknown), or a refusal. */
export function resolveModel(
  app: FastifyInstance,
  name: string,
): Result<CompiledModel | undefined, EdgeError> {
  if (!ModelId.safeParse(name).success) {
    const message = `Model "${printable(name)}" is not allowed.`;
    return {
      ok: false,
      error: new EdgeError({ code: 'model_not_allowed', message, param: 'model' }),
    };
  }
  return { ok: true, value: app.configSnapshot.current?.models.get(name) };
}

/** The tokenizer a model is counted with; `upstream` (llama-server) counts as `estimate`. */
export function tokenizerOf(model: CompiledModel | undefined): TokenizerName {
  const t = model?.tokenizer ?? 'estimate';
  return t === 'upstream' ? 'estimate' : t;
}

export interface AdmittedCall {
  hold: Hold;
  /** The max_tokens the call may use (after the clamp and shrink-to-fit). */
  maxTokens: number;
  /** null when served unmetered (failOpen). */
  admitted: Admitted | null;
  model: CompiledModel;
}

/**
 * Admits a call and puts Holdfast's headers on the reply. Refusals and failures come back as
 * errors for the route to answer; an admitted call always comes back with an open hold.
 */
export async function admitCall(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
  call: {
    model: string;
    config: CompiledModel | undefined;
    promptTokens: number;
    clamp: Clamp;
    /** The edge will grow the hold as output arrives (streamed chat). */
    extensible: boolean;
  },
): Promise<Result<AdmittedCall, EdgeError>> {
  const caller = request.caller!;
  Object.assign(request.audit, {
    model: call.model,
    promptTokens: call.promptTokens,
    maxTokens: call.clamp.maxTokens,
  });
  const result = await admit(
    {
      authority: app.authority,
      holds: app.holds,
      metrics: app.metrics,
      logger: request.log,
      timeoutMs: app.edgeOptions.admitTimeoutMs,
    },
    {
      caller,
      model: call.model,
      promptTokens: call.promptTokens,
      maxTokens: call.clamp.maxTokens,
      extensible: call.extensible,
    },
  );
  if (!result.ok) return result;
  const a = result.value;
  const reservationId = a.metered ? a.admitted.reservationId : a.reservationId;
  request.audit.reservationId = reservationId;
  const hold = a.metered ? a.hold : Hold.unmetered(reservationId, caller.tenant.id);
  // The authority knew the model (it admitted the call); a snapshot that does not is stale.
  const model = call.config ?? (await refreshedModel(app, call.model));
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
      maxTokens: a.metered ? a.admitted.maxTokens : call.clamp.maxTokens,
      admitted: a.metered ? a.admitted : null,
      model,
    },
  };
}

async function refreshedModel(
  app: FastifyInstance,
  name: string,
): Promise<CompiledModel | undefined> {
  await app.configSnapshot.refresh();
  return app.configSnapshot.current?.models.get(name);
}
