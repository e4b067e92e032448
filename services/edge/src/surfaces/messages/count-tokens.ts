import type { CountRoute } from '../../call/count-route.js';
import { countMessagesPrompt, messagesAdapter } from './adapter.js';
import type { CountTokensRequest } from './schema.js';

/** `POST /v1/messages/count_tokens` (call/count-route.ts): `{input_tokens}`. */
export const countTokensRoute: CountRoute<CountTokensRequest> = {
  adapter: messagesAdapter,
  count: countMessagesPrompt,
  answer: (tokens) => ({ input_tokens: tokens }),
};
