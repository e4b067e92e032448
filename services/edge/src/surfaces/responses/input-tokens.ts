import type { CountRoute } from '../../call/count-route.js';
import { responsesAdapter } from './adapter.js';
import type { ResponsesRequest } from './schema.js';

/**
 * `POST /v1/responses/input_tokens` (call/count-route.ts): `{object: "response.input_tokens",
 * input_tokens}`, the count a create of the same body is held with (the body of a create is
 * taken as it is; what only the upstream can count is asked of its own input_tokens). A
 * previous response, a stored item or a container named by id is counted only for the team
 * that owns it, as its create is admitted (the authority's `owns`, before the upstream counts).
 */
export const inputTokensRoute: CountRoute<ResponsesRequest> = {
  adapter: responsesAdapter,
  count: (body, ctx) => responsesAdapter.countPrompt(body, ctx),
  answer: (tokens) => ({ object: 'response.input_tokens', input_tokens: tokens }),
};
