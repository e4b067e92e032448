import type { CountRoute } from '../../call/count-route.js';
import { EdgeError } from '../../errors.js';
import { responsesAdapter } from './adapter.js';
import { referencedItems, toolContainers } from './input.js';
import type { ResponsesRequest } from './schema.js';

/**
 * `POST /v1/responses/input_tokens` (call/count-route.ts): `{object: "response.input_tokens",
 * input_tokens}`, the count a create of the same body is held with (the body of a create is
 * taken as it is; what only the upstream can count is asked of its own input_tokens).
 */
export const inputTokensRoute: CountRoute<ResponsesRequest> = {
  adapter: responsesAdapter,
  count: (body, ctx) => responsesAdapter.countPrompt(body, ctx),
  refuse: readsStored,
  answer: (tokens) => ({ object: 'response.input_tokens', input_tokens: tokens }),
};

/**
 * A previous response or a stored item named by id: the upstream reads it whoever stored it,
 * and only admission asks the authority whose it is (a call's). A count does not ask it (it
 * holds nothing, and an uncounted admit would record a budget's refusal for a call never
 * made), so it does not send another team's id to be counted: refused before anything is.
 */
function readsStored(body: ResponsesRequest): EdgeError | undefined {
  const [id] = referencedItems(body);
  const param = body.previous_response_id
    ? 'previous_response_id'
    : id === undefined
      ? undefined
      : toolContainers(body).includes(id)
        ? 'tools'
        : 'input';
  if (param === undefined) return undefined;
  const what =
    param === 'previous_response_id' ? 'a previous response' : `a stored item by id (${id})`;
  const message =
    `/v1/responses/input_tokens does not count ${what}: only a call's admission checks that ` +
    `what the provider stored is your team's. Send the conversation as input, or read the ` +
    `call's x-holdfast-prompt-tokens header.`;
  return new EdgeError({ code: 'invalid_request', message, param });
}
