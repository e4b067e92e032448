import type { FastifyReply, FastifyRequest } from 'fastify';
import { badForwardedHeader, countContext, resolveModel } from '../../call/context.js';
import type { CallDeps } from '../../call/deps.js';
import { EdgeError } from '../../errors.js';
import { H } from '../../request/headers.js';
import { sendError } from '../../plugins/errors.js';
import { countPrompt } from '../../call/count.js';
import { countMessagesPrompt, messagesAdapter } from './adapter.js';
import type { CountTokensRequest } from './schema.js';

/**
 * `POST /v1/messages/count_tokens`: the input tokens Holdfast would admit the request with,
 * counted as admission counts them (the upstream's count_tokens for `tokenizer: upstream`).
 * A count calls no model and holds nothing, but it is still the caller's: the key, its use
 * case and the model must be ones that could make the call.
 */
export async function countTokens(
  deps: CallDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  body: CountTokensRequest,
): Promise<FastifyReply> {
  const caller = request.caller!;
  const resolved = resolveModel(deps, body.model, messagesAdapter);
  if (!resolved.ok) return sendError(request, reply, resolved.error);
  const useCase = caller.tenant.useCases.get(caller.useCase);
  if (!useCase) {
    const message = `Use case ${caller.useCase} is not registered for team ${caller.tenant.id}.`;
    return sendError(request, reply, new EdgeError({ code: 'use_case_not_registered', message }));
  }
  if (!resolved.value || !useCase.models.includes(body.model)) {
    const message = `Model ${body.model} is not allowed for use case ${useCase.id}.`;
    const err = new EdgeError({ code: 'model_not_allowed', message, param: 'model' });
    return sendError(request, reply, err);
  }
  const badHeader = badForwardedHeader(request, messagesAdapter);
  if (badHeader) return sendError(request, reply, badHeader);
  const counted = await countPrompt(
    countMessagesPrompt,
    body,
    countContext(deps, request, messagesAdapter, resolved.value),
  );
  if (!counted.ok) return sendError(request, reply, counted.error);
  Object.assign(request.audit, { model: body.model, promptTokens: counted.value });
  return reply.header(H.promptTokens, String(counted.value)).send({ input_tokens: counted.value });
}
