import { loadTokenizer } from '@holdfast/tokenizer';
import { registerOpsRoutes, type Logger } from '@holdfast/runtime';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { registerAdmin } from './routes/admin.js';
import { registerChat } from './routes/chat.js';
import { registerEmbeddings } from './routes/embeddings.js';
import { registerLlama } from './routes/llama.js';
import { registerMessages } from './routes/messages.js';
import { registerModels } from './routes/models.js';
import { registerResponses } from './routes/responses.js';
import type { CountedRoute, MockState } from './state.js';
import { ANTHROPIC, OPENAI, sendError, type Surface } from './surface.js';

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
  'POST /v1/responses': 'responses',
  'POST /v1/responses/input_tokens': 'responses.input_tokens',
  'POST /v1/messages': 'messages',
  'POST /v1/messages/count_tokens': 'messages.count_tokens',
} as const satisfies Record<string, CountedRoute>;

/** Anthropic's routes answer in Anthropic's error shape; everything else in OpenAI's. */
const surfaceOf = (url: string): Surface => (url.startsWith('/v1/messages') ? ANTHROPIC : OPENAI);

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
    if (!apiKey || !path.startsWith('/v1/')) return undefined;
    const surface = surfaceOf(path);
    // The Anthropic client sends its key as x-api-key; Bearer works there too.
    const bearer = request.headers.authorization === `Bearer ${apiKey}`;
    if (bearer || (surface === ANTHROPIC && request.headers['x-api-key'] === apiKey)) {
      return undefined;
    }
    const message =
      surface === ANTHROPIC ? 'invalid x-api-key (mock)' : 'Incorrect API key provided (mock).';
    return sendError(reply, surface, 'auth', message);
  });

  app.setErrorHandler((err: Error & { statusCode?: number }, request, reply) => {
    const status = err.statusCode ?? 500;
    const surface = surfaceOf(request.url);
    if (status < 500) {
      const kind = status === 404 ? 'not_found' : status === 401 ? 'auth' : 'invalid';
      // The status stays the framework's own (400 for bad JSON, 413 for a large body, ...).
      return reply.code(status).send(surface.error(kind, err.message).body);
    }
    request.log.error({ err }, 'mock upstream handler failed');
    return sendError(reply, surface, 'server', 'mock upstream internal error');
  });
  app.setNotFoundHandler((request, reply) =>
    sendError(
      reply,
      surfaceOf(request.url),
      'not_found',
      `Unknown request URL: ${request.method} ${request.url}`,
      {
        code: 'unknown_url',
      },
    ),
  );

  registerOpsRoutes(app, registry, [
    { name: 'tokenizer', check: () => loadTokenizer('o200k_base').then(() => true) },
  ]);
  registerChat(app, state);
  registerEmbeddings(app, state);
  registerModels(app, state);
  registerResponses(app, state);
  registerMessages(app, state);
  registerLlama(app);
  registerAdmin(app, state);
  return app;
}
