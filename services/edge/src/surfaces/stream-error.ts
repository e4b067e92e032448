/**
 * The HTTP status an error OpenAI writes inside a stream stands for (a chat chunk's
 * `{"error": {type, code}}`, a Responses `error` event's or `response.failed`'s `code`): a
 * rate limit 429, an overload 503, a request it refuses 400, a `server_error` 500, anything
 * else `otherwise` (an error of another kind: a proxy's, a server's). The edge retries what a status would have been retried for.
 */
export function openaiStreamErrorStatus(type: unknown, code: unknown, otherwise: number): number {
  const words = `${typeof type === 'string' ? type : ''} ${typeof code === 'string' ? code : ''}`;
  if (/rate_limit|insufficient_quota/.test(words))
    return /insufficient_quota/.test(words) ? 402 : 429;
  if (/overloaded|unavailable/.test(words)) return 503;
  if (/invalid_request|invalid_prompt|invalid_image|context_length/.test(words)) return 400;
  // OpenAI's own server error (`server_error`), on chat as on Responses: the same 500.
  if (/server_error/.test(words)) return 500;
  return otherwise;
}
