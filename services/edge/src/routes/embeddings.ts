import type { FastifyInstance } from 'fastify';
import { sendError } from '../plugins/errors.js';
import { recordRequest } from '../plugins/observability.js';
import { closeFailedOpen, upstreamError } from '../proxy/failure.js';
import { targetsOf } from '../proxy/chat.js';
import { EmbeddingsRequest } from '../schemas/embeddings.js';
import { classify } from '../upstream/client.js';
import { admitCall, resolveModel, tokenizerOf } from './admit-call.js';

/** Embeddings produce no output: the hold is the input plus the one token admission requires. */
const EMBEDDING_MAX_TOKENS = 1;

/**
 * `POST /v1/embeddings`: count the input, admit it, forward, settle the input tokens the
 * upstream reports (the edge's count when it reports none).
 */
export function registerEmbeddings(app: FastifyInstance): void {
  app.post('/v1/embeddings', { schema: { body: EmbeddingsRequest } }, async (request, reply) => {
    const body = request.body as EmbeddingsRequest;
    const model = resolveModel(app, body.model);
    if (!model.ok) return sendError(request, reply, model.error);
    const promptTokens = await app.counter.countEmbedding(body.input, tokenizerOf(model.value));
    const clamp = {
      requested: null,
      ceiling: EMBEDDING_MAX_TOKENS,
      maxTokens: EMBEDDING_MAX_TOKENS,
    };
    const admitted = await admitCall(app, request, reply, {
      model: body.model,
      config: model.value,
      promptTokens,
      clamp,
      extensible: false,
    });
    if (!admitted.ok) return sendError(request, reply, admitted.error);
    const { hold, model: config } = admitted.value;
    const live = app.calls.start(request.caller!.tenant, reply.raw);
    try {
      const result = await app.upstream.open({
        path: '/embeddings',
        body: { ...body, model: config.upstreamModel ?? config.id },
        targets: targetsOf(app, config),
        signal: live.signal,
        stream: false,
      });
      if (!result.ok) {
        closeFailedOpen(hold, result.failure, result.sent, promptTokens);
        const err = upstreamError(result.failure);
        if (err) return await sendError(request, reply, err);
        recordRequest(request, 499, reply.elapsedTime);
        return await reply.hijack();
      }
      const { opened } = result;
      try {
        const json = (await opened.body.json()) as { usage?: { prompt_tokens?: unknown } };
        const reported = json.usage?.prompt_tokens;
        const used =
          typeof reported === 'number' && Number.isSafeInteger(reported) && reported >= 0
            ? reported
            : promptTokens;
        hold.settle(
          { promptTokens: used, completionTokens: 0, cachedPromptTokens: 0 },
          'completed',
        );
        Object.assign(request.audit, { completionTokens: 0, outcome: 'completed' });
        app.metrics.tokens.inc({ kind: 'prompt', model: config.id }, used);
        return await reply.send(json);
      } catch (err) {
        const failure = classify(err, live.signal, opened.signal);
        closeFailedOpen(hold, failure, true, promptTokens);
        const answer = upstreamError(failure);
        return await (answer ? sendError(request, reply, answer) : reply.hijack());
      } finally {
        opened.done();
      }
    } finally {
      app.calls.end(live);
      if (!hold.closed) hold.release('upstream_error');
    }
  });
}
