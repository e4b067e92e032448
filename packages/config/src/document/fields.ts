/**
 * Request fields that can make a model write more output, or more choices, than a call was
 * admitted for, across the OpenAI-compatible servers people put behind a gateway. The edge
 * never forwards them as the client sent them: each is removed, or set to what was admitted.
 * An upstream's `passThrough` cannot name one (config validation says so).
 *
 * - OpenAI: `max_tokens`, `max_completion_tokens`, `n`; `prediction` (rejected prediction
 *   tokens are billed as output beyond max_tokens); Responses `max_output_tokens`.
 * - llama.cpp server: `n_predict` (wins over max_tokens), `n_probs` is harmless.
 * - vLLM: `best_of`, `min_tokens`, `use_beam_search`, `length_penalty` with beams.
 * - Hugging Face TGI / transformers: `max_new_tokens`, `max_length`, `num_return_sequences`,
 *   `num_beams`, `best_of`.
 * - Ollama: `num_predict` (in `options`, and top-level on some proxies), `options` itself is
 *   forwarded only when allowed, with `num_predict` set.
 * - Anthropic Messages (for OpenAI-compatible proxies of it): `max_tokens_to_sample`.
 */
const CONTROLLED_FIELDS = [
  'max_tokens',
  'max_completion_tokens',
  'max_output_tokens',
  'n',
  'n_predict',
  'num_predict',
  'max_new_tokens',
  'max_length',
  'min_tokens',
  'best_of',
  'num_return_sequences',
  'num_beams',
  'use_beam_search',
  'beam_width',
  'prediction',
  'max_tokens_to_sample',
] as const;

const controlled: ReadonlySet<string> = new Set(CONTROLLED_FIELDS);

export function isControlledField(name: string): boolean {
  return controlled.has(name);
}
