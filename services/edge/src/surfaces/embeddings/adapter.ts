import type { Usage } from '@holdfast/events';
import { Ok } from '@holdfast/runtime';
import type { SurfaceAdapter, Transcript } from '../../call/adapter.js';
import { forwardedBody } from '../../call/forward.js';
import { parseObject } from '../../call/pump.js';
import { errorBody } from '../../errors.js';
import { sendError } from '../../plugins/errors.js';
import { sseEvent } from '../../upstream/sse.js';
import { plainUsage, usageCount } from '../usage.js';
import type { EmbeddingsRequest } from './schema.js';

const EMBEDDING_FIELDS: ReadonlySet<string> = new Set([
  'model',
  'input',
  'encoding_format',
  'dimensions',
  'user',
]);

/** An embeddings answer: one JSON object, its usage the input tokens. */
class EmbeddingsTranscript implements Transcript {
  #json: Record<string, unknown> | undefined;

  accept(event: { data: string }) {
    this.#json = parseObject(event.data);
    return this.#json ? { texts: [], forward: null } : undefined;
  }
  usage(): Usage | undefined {
    const u = this.#json?.usage as { prompt_tokens?: unknown } | undefined;
    const prompt = usageCount(u?.prompt_tokens);
    return prompt === undefined ? undefined : plainUsage(prompt, 0);
  }
  finished(): boolean {
    return this.#json !== undefined;
  }
  endAtLength(): string {
    return '';
  }
  errorEvent(err: Parameters<typeof errorBody>[0], requestId: string): string {
    return sseEvent(JSON.stringify(errorBody(err, requestId)));
  }
  doneEvent(): string {
    return '';
  }
  assemble(): unknown {
    return this.#json;
  }
}

/**
 * `POST /v1/embeddings`: input tokens only. The hold is the input plus the one output token
 * admission requires; the upstream's reported input tokens are settled (the edge's count when
 * it reports none).
 */
export const embeddingsAdapter: SurfaceAdapter<EmbeddingsRequest> = {
  name: 'embeddings',
  apis: ['openai'],
  path: '/embeddings',
  extensible: false,
  streamUpstream: false,
  asked: (body) => ({
    model: body.model,
    maxOutput: 1,
    choices: 1,
    stream: false,
    endUser: body.user ?? null,
  }),
  countPrompt: async (body, ctx) =>
    Ok(
      await ctx.deps.counter.count(
        { kind: 'embedding', tokenizer: ctx.tokenizer, input: body.input },
        ctx.owner,
      ),
    ),
  upstreamBody: (body, grant) =>
    forwardedBody(body, {
      known: EMBEDDING_FIELDS,
      passThrough: grant.upstream.passThrough,
      set: { model: grant.model.upstreamModel ?? grant.model.id },
    }),
  transcript: () => new EmbeddingsTranscript(),
  asEvents: (json) => [{ event: undefined, data: JSON.stringify(json) }],
  sendError,
};
