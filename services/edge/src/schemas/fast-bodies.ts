import { requestParse, type FastParse } from '@holdfast/events';
import type { z } from 'zod';
import { ChatRequest } from '../surfaces/chat/schema.js';
import { EmbeddingsRequest } from '../surfaces/embeddings/schema.js';
import {
  CountTokensRequest,
  MessagesRequest,
  toolResultIssues,
} from '../surfaces/messages/schema.js';
import { ResponsesRequest } from '../surfaces/responses/schema.js';

/**
 * The call routes' bodies checked fast (issue 14: zod cost 30-60 µs of CPU a call): ajv from
 * zod's JSON Schema (@holdfast/events' requestParse). None has a transform, a default, a
 * preprocess or a pipe, so zod's output is the body rebuilt; every object is loose, so unknown
 * keys stay; and the fast parse puts every object in zod's key order, so what passes is zod's
 * output to the byte (tools, parts and items are counted as their JSON). Messages' one
 * refinement (a tool_result's content read as blocks) is a rule calling the predicate its
 * `superRefine` calls. Any other schema (the admin routes' and status' bodies and queries: rare
 * calls, some with coercions) is zod's alone. `fast-bodies.unit.test.ts` holds each fast verdict and output to zod's.
 */

type Blocks = CountTokensRequest['system'] | CountTokensRequest['messages'][number]['content'];

/** Every content block is a `Block`, refined: system's and each message's. */
function blocksHold(body: CountTokensRequest): boolean {
  const holds = (blocks: Blocks) =>
    !Array.isArray(blocks) || blocks.every((b) => toolResultIssues(b).length === 0);
  return holds(body.system) && body.messages.every((m) => holds(m.content));
}

const FAST = new Map<z.ZodType, FastParse<unknown>>([
  [ChatRequest, requestParse(ChatRequest)],
  [ResponsesRequest, requestParse(ResponsesRequest)],
  [MessagesRequest, requestParse(MessagesRequest, [blocksHold])],
  [CountTokensRequest, requestParse(CountTokensRequest, [blocksHold])],
  [EmbeddingsRequest, requestParse(EmbeddingsRequest)],
]);

/** The fast parse of a call route's body (zod's output, or undefined: ask zod); none for others. */
export function fastParse(schema: z.ZodType): FastParse<unknown> | undefined {
  return FAST.get(schema);
}
