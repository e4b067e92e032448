/**
 * The HTTP status an error OpenAI writes inside a stream stands for (a chat chunk's
 * `{"error": {type, code}}`, a Responses `error` event's or `response.failed`'s `code`): a
 * rate limit 429, an overload 503, a request it refuses 400, anything else `otherwise` (a
 * server error). The edge retries what a status would have been retried for.
 */
export function openaiStreamErrorStatus(type: unknown, code: unknown, otherwise: number): number {
  const words = `${typeof type === 'string' ? type : ''} ${typeof code === 'string' ? code : ''}`;
  if (/rate_limit|insufficient_quota/.test(words))
    return /insufficient_quota/.test(words) ? 402 : 429;
  if (/overloaded|unavailable/.test(words)) return 503;
  if (/invalid_request|invalid_prompt|invalid_image|context_length/.test(words)) return 400;
  return otherwise;
}
