import type { FastifyInstance } from 'fastify';
import { authenticate, repeatedHeader } from '../request/auth.js';
import { callDeps } from '../call/deps.js';
import { runCall } from '../call/pipeline.js';
import { EdgeError } from '../errors.js';
import { sendError } from '../plugins/errors.js';
import { chatAdapter } from '../surfaces/chat/adapter.js';
import { ChatRequest } from '../surfaces/chat/schema.js';
import { embeddingsAdapter } from '../surfaces/embeddings/adapter.js';
import { EmbeddingsRequest } from '../surfaces/embeddings/schema.js';
import { messagesAdapter } from '../surfaces/messages/adapter.js';
import { serveCount } from '../call/count-route.js';
import { countTokensRoute } from '../surfaces/messages/count-tokens.js';
import { CountTokensRequest, MessagesRequest } from '../surfaces/messages/schema.js';
import { responsesAdapter } from '../surfaces/responses/adapter.js';
import { inputTokensRoute } from '../surfaces/responses/input-tokens.js';
import { ResponsesRequest } from '../surfaces/responses/schema.js';
import { registerModels } from './models.js';
import { OpenRequests, type Refusal } from '../request/open-requests.js';
import { Intake } from '../request/intake.js';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../request/json-depth.js';

/**
 * The model APIs: OpenAI's (chat, embeddings, responses) and Anthropic's (messages). Every
 * request is authenticated from its headers before its body is read, so an unknown key never
 * costs a body parse, a token count or an admission, and a tenant at its cap of requests in
 * flight on this edge is refused there too. A large body waits for a fair turn on the event
 * loop before it is parsed (request/intake.ts). Each surface is an adapter over one call
 * pipeline (call/pipeline.ts).
 */
export function v1Routes(app: FastifyInstance): void {
  const open = new OpenRequests({
    ...app.edgeOptions.openBodies,
    bodyLimitBytes: app.edgeOptions.bodyLimitBytes,
  });
  app.metrics.watchOpenBodies(() => open.bytes());
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
    const twice = repeatedHeader(request.raw.rawHeaders);
    if (twice) return sendError(request, reply, twice);
    const auth = authenticate(request.headers, cfg);
    if (!auth.ok) return sendError(request, reply, auth.error);
    const caller = auth.value;
    request.caller = caller;
    Object.assign(request.audit, {
      tenant: caller.tenant.id,
      keyId: caller.keyId,
      useCase: caller.useCase,
    });
    if (request.method !== 'POST') return undefined;
    const { id, maxInFlight } = caller.tenant;
    const opened = open.open(id, maxInFlight, request.headers['content-length'], reply.raw);
    if (opened.ok) {
      request.open = opened.value;
      return undefined;
    }
    app.metrics.earlyRefusals.inc({ code: 'concurrency_limit' });
    return sendError(request, reply, atCap(id, opened.error));
  });
  parseInTurns(app);
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
  // Counted as a create of the same body is held (its body, taken as it is).
  app.post('/v1/responses/input_tokens', { schema: { body: ResponsesRequest } }, (request, reply) =>
    serveCount(deps, request, reply, inputTokensRoute, request.body as ResponsesRequest),
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
    (request, reply) =>
      serveCount(deps, request, reply, countTokensRoute, request.body as CountTokensRequest),
  );
  registerModels(app);
}

function atCap(tenant: string, refusal: Refusal): EdgeError {
  const mib = (bytes: number) => `${Math.round(bytes / 1_048_576).toLocaleString('en-US')} MiB`;
  const message = {
    in_flight: `Team ${tenant} already has ${refusal.cap} calls in flight (its limit). Retry when one ends.`,
    tenant_bytes: `Team ${tenant} already has requests with ${mib(refusal.cap)} of bodies open on this edge (its limit). Retry when one ends.`,
    edge_bytes: `This edge already has requests with ${mib(refusal.cap)} of bodies open (its limit). Retry shortly.`,
  }[refusal.why];
  return new EdgeError({ code: 'concurrency_limit', message, headers: { 'retry-after': '1' } });
}

/**
 * JSON bodies are parsed by fastify's own parser (prototype poisoning refused), a body above
 * EDGE_INTAKE_INLINE_BYTES only in its tenant's turn (request/intake.ts). A body whose client
 * left while it waited is not parsed; one nested deeper than MAX_JSON_DEPTH is a 400.
 */
function parseInTurns(app: FastifyInstance): void {
  const { inlineBytes, share } = app.edgeOptions.intake;
  const intake = new Intake({
    inlineBytes,
    share,
    onWaited: (tenant, seconds) => app.metrics.intakeWait.observe({ tenant }, seconds),
  });
  app.metrics.watchIntake(() => intake.waiting());
  const parseJson = app.getDefaultJsonParser('error', 'error');
  const parse: typeof parseJson = (request, text, done) =>
    parseJson(request, text, (err, body) => {
      if (err) return done(err, undefined);
      if (!nestsDeeperThan(body, MAX_JSON_DEPTH)) return done(null, body);
      const message = `The request body nests objects and arrays more than ${MAX_JSON_DEPTH} levels deep.`;
      done(new EdgeError({ code: 'invalid_request', message }), undefined);
    });
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = body as string;
    const tenant = request.caller?.tenant.id;
    if (tenant === undefined || !intake.queues(text.length)) return parse(request, text, done);
    const socket = request.raw.socket as { destroyed?: boolean } | null | undefined;
    void intake
      .turn(tenant, text.length, () => socket?.destroyed === true)
      .then((taken) => {
        if (taken) return parse(request, text, done);
        done(
          new EdgeError({
            code: 'invalid_request',
            message: 'The client closed the connection before its body was parsed.',
          }),
          undefined,
        );
      });
  });
}
