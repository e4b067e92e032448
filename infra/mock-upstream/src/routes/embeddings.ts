import { countEmbeddingInput, encodingForModel, loadTokenizer } from '@holdfast/tokenizer';
import type { FastifyInstance } from 'fastify';
import { startCall } from '../call.js';
import { hash32, prng } from '../generate.js';
import { readRequest } from '../request.js';
import type { MockState } from '../state.js';
import { OPENAI } from '../surface.js';
import { uncachedPrompt } from '../usage.js';
import { EmbeddingsBody } from './schemas.js';

/** `POST /v1/embeddings`: deterministic unit vectors, usage counted in the model's encoding. */
export function registerEmbeddings(app: FastifyInstance, state: MockState): void {
  app.post('/v1/embeddings', async (request, reply) => {
    const read = readRequest(EmbeddingsBody, request, reply, state);
    if (!read) return reply;
    const { model, input, encoding_format: format, dimensions } = read.body;

    const promptTokens = countEmbeddingInput(input, await loadTokenizer(encodingForModel(model)));
    const call = startCall(
      state,
      reply,
      OPENAI,
      {
        route: 'embeddings',
        model,
        stream: false,
        includeUsage: false,
        maxTokens: null,
        outputCap: 0,
        vendorFields: {},
        choices: 1,
        candidates: 1,
        endUser: typeof read.body.user === 'string' ? read.body.user : null,
        prompt: uncachedPrompt(promptTokens),
        serviceTier: 'default',
      },
      read.plan,
    );
    if (!call || (await call.failBeforeResponse())) return reply;
    if (!(await call.wait(read.plan.firstTokenLatencyMs))) {
      call.finish('aborted', 0, null, false);
      reply.hijack();
      return reply;
    }

    const items = typeof input === 'string' || typeof input[0] === 'number' ? [input] : input;
    const dims = dimensions ?? state.behaviour.embeddingDimensions;
    const data = items.map((item, index) => {
      const vector = unitVector(hash32(JSON.stringify(item), state.behaviour.seed), dims);
      return {
        object: 'embedding',
        index,
        embedding:
          format === 'base64' ? Buffer.from(vector.buffer).toString('base64') : Array.from(vector),
      };
    });
    call.finish('completed', 0, null, true);
    return reply.headers({ ...call.headers, 'x-request-id': call.id }).send({
      object: 'list',
      data,
      model,
      usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
    });
  });
}

function unitVector(seed: number, dims: number): Float32Array {
  const next = prng(seed);
  const v = Float32Array.from({ length: dims }, () => next() * 2 - 1);
  const norm = Math.hypot(...v) || 1;
  return v.map((x) => x / norm);
}
