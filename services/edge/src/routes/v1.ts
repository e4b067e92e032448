import type { FastifyInstance } from 'fastify';
import { authenticate } from '../auth.js';
import { EdgeError } from '../errors.js';
import { sendError } from '../plugins/errors.js';
import { registerChat } from './chat.js';
import { registerEmbeddings } from './embeddings.js';
import { registerModels } from './models.js';

/**
 * The OpenAI-compatible API. Every request is authenticated from its headers before its body
 * is read, so an unknown key never costs a body parse, a token count or an admission.
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
    const { caller } = auth;
    request.caller = caller;
    Object.assign(request.audit, {
      tenant: caller.tenant.id,
      keyId: caller.keyId,
      useCase: caller.useCase,
    });
    return undefined;
  });
  registerChat(app);
  registerEmbeddings(app);
  registerModels(app);
}
