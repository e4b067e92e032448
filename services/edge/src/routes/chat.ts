import type { FastifyInstance } from 'fastify';
import { clampMaxTokens } from '../clamp.js';
import { EdgeError } from '../errors.js';
import { sendError } from '../plugins/errors.js';
import { proxyChat } from '../proxy/chat.js';
import { ChatRequest } from '../schemas/chat.js';
import type { CompiledModel } from '@holdfast/config';
import type { TokenizerName } from '@holdfast/tokenizer';
import { targetsOf } from '../proxy/chat.js';
import { admitCall, resolveModel, tokenizerOf } from './admit-call.js';

/**
 * The prompt in the model's tokens: the exact encoding for OpenAI models; for a model whose
 * tokenizer is `upstream` (llama-server), its own template and tokenizer; else (or when the
 * upstream cannot say) the pessimistic estimate.
 */
async function countPrompt(
  app: FastifyInstance,
  body: ChatRequest,
  model: CompiledModel | undefined,
  tokenizer: TokenizerName,
): Promise<number> {
  if (model?.tokenizer === 'upstream') {
    const target = targetsOf(app, model)[0];
    const counted = target ? await app.upstream.countPrompt(target, body.messages) : undefined;
    if (counted !== undefined) return counted;
  }
  return app.counter.countChat(body, tokenizer);
}

/**
 * `POST /v1/chat/completions`: validate (schema), count the prompt in the model's encoding,
 * clamp max_tokens, admit, then proxy (always streaming from the upstream).
 */
export function registerChat(app: FastifyInstance): void {
  app.post('/v1/chat/completions', { schema: { body: ChatRequest } }, async (request, reply) => {
    const caller = request.caller!;
    const body = request.body as ChatRequest;
    const model = resolveModel(app, body.model);
    if (!model.ok) return sendError(request, reply, model.error);
    const n = body.n ?? 1;
    const requested = body.max_completion_tokens ?? body.max_tokens ?? null;
    const clamp = clampMaxTokens(requested, caller.tenant, caller.useCase, model.value);
    if (clamp.maxTokens < n) {
      return sendError(
        request,
        reply,
        new EdgeError({
          code: 'invalid_request',
          message: `n=${n} choices need at least one token each, but max_tokens is ${clamp.maxTokens}.`,
          param: 'n',
        }),
      );
    }
    const tokenizer = tokenizerOf(model.value);
    const promptTokens = await countPrompt(app, body, model.value, tokenizer);
    const admitted = await admitCall(app, request, reply, {
      model: body.model,
      config: model.value,
      promptTokens,
      clamp,
      extensible: true,
    });
    if (!admitted.ok) return sendError(request, reply, admitted.error);
    return proxyChat(app, request, reply, {
      body,
      n,
      promptTokens,
      tokenizer,
      call: admitted.value,
    });
  });
}
