import { loadTokenizer } from '@holdfast/tokenizer';
import { registerOpsRoutes, type Logger } from '@holdfast/runtime';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { errorBody } from './openai.js';
import { registerAdmin } from './routes/admin.js';
import { registerChat } from './routes/chat.js';
import { registerEmbeddings } from './routes/embeddings.js';
import { registerLlama } from './routes/llama.js';
import { registerModels } from './routes/models.js';
import type { MockState } from './state.js';

export interface AppDeps {
  state: MockState;
  logger: Logger;
  registry: Registry;
  /** When set, `/v1/*` requires `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
}

const COUNTED = {
  'POST /v1/chat/completions': 'chat.completions',
  'POST /v1/embeddings': 'embeddings',
  'GET /v1/models': 'models',
} as const;

/** The mock's HTTP app: OpenAI routes under /v1, test controls under /_mock, ops routes. */
export function buildApp({ state, logger, registry, apiKey }: AppDeps): FastifyInstance {
  const loggerInstance: FastifyBaseLogger = logger;
  const app = Fastify({
    loggerInstance,
    logController: new LogController({ disableRequestLogging: true }),
    // Long prompts and base64 images.
    bodyLimit: 64 * 1024 * 1024,
    // Hanging requests and open streams must not keep close() waiting.
    forceCloseConnections: true,
  });

  app.addHook('onRequest', async (request, reply) => {
    const path = request.url.split('?', 1)[0] ?? '';
    const route = COUNTED[`${request.method} ${path}` as keyof typeof COUNTED];
    if (route) state.received(route);
    if (apiKey && path.startsWith('/v1/') && request.headers.authorization !== `Bearer ${apiKey}`) {
      return reply
        .code(401)
        .send(
          errorBody(
            'Incorrect API key provided (mock).',
            'invalid_request_error',
            'invalid_api_key',
          ),
        );
    }
    return undefined;
  });

  app.setErrorHandler((err: Error & { statusCode?: number }, request, reply) => {
    const status = err.statusCode ?? 500;
    if (status < 500) {
      return reply.code(status).send(errorBody(err.message, 'invalid_request_error'));
    }
    request.log.error({ err }, 'mock upstream handler failed');
    return reply.code(500).send(errorBody('mock upstream internal error', 'server_error'));
  });
  app.setNotFoundHandler((request, reply) =>
    reply
      .code(404)
      .send(
        errorBody(
          `Unknown request URL: ${request.method} ${request.url}`,
          'invalid_request_error',
          'unknown_url',
        ),
      ),
  );

  registerOpsRoutes(app, registry, [
    { name: 'tokenizer', check: () => loadTokenizer('o200k_base').then(() => true) },
  ]);
  registerChat(app, state);
  registerEmbeddings(app, state);
  registerModels(app, state);
  registerLlama(app);
  registerAdmin(app, state);
  return app;
}
