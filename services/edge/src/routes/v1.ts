import type { FastifyInstance } from 'fastify';
import { authenticate } from '../request/auth.js';
import { callDeps } from '../call/deps.js';
import { runCall } from '../call/pipeline.js';
import { EdgeError } from '../errors.js';
import { sendError } from '../plugins/errors.js';
import { chatAdapter } from '../surfaces/chat/adapter.js';
import { ChatRequest } from '../surfaces/chat/schema.js';
import { embeddingsAdapter } from '../surfaces/embeddings/adapter.js';
import { EmbeddingsRequest } from '../surfaces/embeddings/schema.js';
import { messagesAdapter } from '../surfaces/messages/adapter.js';
import { countTokens } from '../surfaces/messages/count-tokens.js';
import { CountTokensRequest, MessagesRequest } from '../surfaces/messages/schema.js';
import { responsesAdapter } from '../surfaces/responses/adapter.js';
import { ResponsesRequest } from '../surfaces/responses/schema.js';
import { registerModels } from './models.js';

/**
 * The model APIs: OpenAI's (chat, embeddings, responses) and Anthropic's (messages). Every request is authenticated from its headers before its body
 * is read, so an unknown key never costs a body parse, a token count or an admission. Each
 * surface is an adapter over one call pipeline (call/pipeline.ts).
 */
export function v1Routes(app: FastifyInstance): void {
  app.addHook('onRequest', async (request, reply) => {
    const cfg = app.configSnapshot.current;
    if (!cfg) {
      return sendError(
        request,
        reply,
        new EdgeError({
          code: 'budget_authority_unavailable',
          message: 'The edge has no configuration from the budget authority yet. Retry shortly.',
          headers: { 'retry-after': '1' },
        }),
      );
    }
    const auth = authenticate(request.headers, cfg);
    if (!auth.ok) return sendError(request, reply, auth.error);
    const caller = auth.value;
    request.caller = caller;
    Object.assign(request.audit, {
      tenant: caller.tenant.id,
      keyId: caller.keyId,
      useCase: caller.useCase,
    });
    return undefined;
  });
  const deps = callDeps(app);
  app.post('/v1/chat/completions', { schema: { body: ChatRequest } }, (request, reply) =>
    runCall(deps, request, reply, chatAdapter, request.body as ChatRequest),
  );
  app.post('/v1/embeddings', { schema: { body: EmbeddingsRequest } }, (request, reply) =>
    runCall(deps, request, reply, embeddingsAdapter, request.body as EmbeddingsRequest),
  );
  app.post('/v1/responses', { schema: { body: ResponsesRequest } }, (request, reply) =>
    runCall(deps, request, reply, responsesAdapter, request.body as ResponsesRequest),
  );
  // Anthropic's surface answers errors in Anthropic's shape (validation and auth included).
  const anthropic = { errorShape: 'anthropic' } as const;
  app.post(
    '/v1/messages',
    { schema: { body: MessagesRequest }, config: anthropic },
    (request, reply) =>
      runCall(deps, request, reply, messagesAdapter, request.body as MessagesRequest),
  );
  app.post(
    '/v1/messages/count_tokens',
    { schema: { body: CountTokensRequest }, config: anthropic },
    (request, reply) => countTokens(deps, request, reply, request.body as CountTokensRequest),
  );
  registerModels(app);
}
