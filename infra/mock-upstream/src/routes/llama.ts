import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { errorBody } from '../openai.js';
import { applyTemplate, countTemplateTokens } from '../template.js';

// The chat request as /v1/chat/completions takes it; the fields the template renders are read.
const TemplateBody = z.looseObject({
  messages: z.array(z.looseObject({ role: z.string(), content: z.unknown() })).min(1),
  tools: z.array(z.unknown()).nullish(),
});
const TokenizeBody = z.object({ content: z.string().max(10_000_000) });

/**
 * llama-server's `/apply-template` and `/tokenize` (at the server root, not under /v1), which
 * the edge's `upstream` tokenizer calls to count a self-hosted model's prompt exactly. Like
 * llama-server, /apply-template takes a whole chat request and renders what the template
 * renders (messages and tools; see template.ts), so a counter that sends only `messages`
 * undercounts a request with tools. The token ids are placeholders; their number is exact.
 */
export function registerLlama(app: FastifyInstance): void {
  app.post('/apply-template', (request, reply) => {
    const parsed = TemplateBody.safeParse(request.body);
    if (!parsed.success)
      return reply
        .code(400)
        .send(
          errorBody('messages: an array of {role, content} is required', 'invalid_request_error'),
        );
    return { prompt: applyTemplate(parsed.data) };
  });
  app.post('/tokenize', async (request, reply) => {
    const parsed = TokenizeBody.safeParse(request.body);
    if (!parsed.success)
      return reply
        .code(400)
        .send(errorBody('content: a string is required', 'invalid_request_error'));
    const n = await countTemplateTokens(parsed.data.content);
    return { tokens: Array.from({ length: n }, (_, i) => i) };
  });
}
