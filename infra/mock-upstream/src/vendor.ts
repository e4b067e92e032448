import { Err, Ok, type Result } from '@holdfast/runtime';
import type { Plan } from './plan.js';
import { wantedTokens } from './generate.js';

/**
 * The length and count fields of the OpenAI-compatible servers people run behind a gateway,
 * obeyed as those servers obey them, so a test can prove the gateway strips them. Checked
 * against the servers' sources and docs:
 * - llama.cpp server: `n_predict` (read before `max_tokens`, so it wins; -1 = no limit),
 *   `n_cmpl` (read before `n`), `ignore_eos`;
 * - Ollama: `options.num_predict` (its native option; -1 = no limit, -2 = fill the context),
 *   merged over what it maps from `max_tokens`;
 * - TGI `/generate` (`parameters.max_new_tokens`) and the HF-style servers that take a top-level
 *   `max_new_tokens` (text-generation-webui, SGLang's sampling params);
 * - vLLM: `min_tokens` (at least that many, and an error above the cap, as vLLM checks),
 *   `ignore_eos` (write to the cap), `best_of` (that many candidates generated; the mock bills
 *   all of them, as OpenAI bills `best_of`), `n`.
 * Precedence when several length fields are present: n_predict, options.num_predict,
 * max_new_tokens, parameters.max_new_tokens, then the surface's own field. Values of the wrong
 * type are ignored, as llama.cpp's `json_value` ignores them.
 */
export interface ReplyShape {
  /** Output tokens each candidate may write. */
  cap: number;
  /** The field that set the cap, or null for the server's default (`maxOutputTokens`). */
  capField: string | null;
  /** vLLM `min_tokens`: at least this many (within the cap). */
  minTokens: number;
  /** `ignore_eos` / `num_predict: -2`: every candidate writes exactly `cap`. */
  fillCap: boolean;
  /** Choices returned. */
  choices: number;
  /** Candidates generated and billed (`best_of`); the first `choices` are returned. */
  candidates: number;
  /** The vendor fields the request carried, as received. */
  vendorFields: Record<string, unknown>;
}

/** Which fields a surface has: chat returns several choices, the others one. */
export interface ShapeInput {
  body: Record<string, unknown>;
  /** The surface's own length field (`max_completion_tokens ?? max_tokens`, ...). */
  surfaceMax: number | null;
  surfaceField: string;
  /** The surface's own `n` (chat), else 1. */
  n: number;
  /** Count fields (`n_cmpl`, `best_of`) apply: chat only, the one surface with choices. */
  counts: boolean;
  /** The server's cap when no field sets one. */
  serverMax: number;
}

const MAX_CHOICES = 128;

/** A request field the server refuses, as an OpenAI-style `invalid_request_error` names it. */
interface InvalidField {
  code: 'invalid_request';
  message: string;
  param: string;
}

export function replyShape(input: ShapeInput): Result<ReplyShape, InvalidField> {
  const { body, serverMax } = input;
  const vendorFields: Record<string, unknown> = {};
  const read = (path: string): number | undefined => {
    let value: unknown = body;
    for (const key of path.split('.')) {
      value =
        typeof value === 'object' && value !== null
          ? (value as Record<string, unknown>)[key]
          : undefined;
    }
    if (value === undefined) return undefined;
    vendorFields[path] = value;
    return typeof value === 'number' && Number.isInteger(value) ? value : undefined;
  };
  const nPredict = read('n_predict');
  const numPredict = read('options.num_predict');
  const maxNew = read('max_new_tokens');
  const paramsMaxNew = read('parameters.max_new_tokens');
  const minTokens = read('min_tokens');
  const ignoreEos = body.ignore_eos;
  if (ignoreEos !== undefined) vendorFields.ignore_eos = ignoreEos;
  const nCmpl = input.counts ? read('n_cmpl') : undefined;
  const bestOf = input.counts ? read('best_of') : undefined;

  let cap = input.surfaceMax ?? serverMax;
  let capField: string | null = input.surfaceMax === null ? null : input.surfaceField;
  let fillCap = ignoreEos === true;
  const lengthField = (
    [
      ['n_predict', nPredict],
      ['options.num_predict', numPredict],
      ['max_new_tokens', maxNew],
      ['parameters.max_new_tokens', paramsMaxNew],
    ] as const
  ).find(([, value]) => value !== undefined && value >= -2);
  if (lengthField) {
    const [field, value] = lengthField as readonly [string, number];
    // -1: no limit but the server's; -2 (Ollama): keep writing until the context is full.
    cap = value < 0 ? serverMax : value;
    capField = value < 0 ? null : field;
    if (value === -2 && field === 'options.num_predict') fillCap = true;
  }

  const choices = Math.max(1, nCmpl ?? input.n);
  if (choices > MAX_CHOICES) {
    return invalid(`n must be at most ${MAX_CHOICES}, got ${choices}`, nCmpl ? 'n_cmpl' : 'n');
  }
  if (bestOf !== undefined && (bestOf < choices || bestOf > MAX_CHOICES)) {
    return invalid(
      `best_of must be greater than or equal to n and at most ${MAX_CHOICES}, got n=${choices}, best_of=${bestOf}.`,
      'best_of',
    );
  }
  const min = Math.max(0, minTokens ?? 0);
  if (min > cap) {
    return invalid(
      `min_tokens must be less than or equal to max_tokens=${cap}, got ${min}.`,
      'min_tokens',
    );
  }
  return Ok({
    cap,
    capField,
    minTokens: min,
    fillCap,
    choices,
    candidates: bestOf ?? choices,
    vendorFields,
  });
}

function invalid(message: string, param: string) {
  return Err<InvalidField>({ code: 'invalid_request', message, param });
}

/**
 * How long one candidate is, and why it ended. Reasoning comes first and counts against the
 * cap (as OpenAI counts it against max_completion_tokens); `tokens` is the visible output.
 */
export function candidateLength(
  shape: ReplyShape,
  plan: Plan,
  seed: number,
  reasoningBudget = 0,
): { tokens: number; reasoning: number; finish: 'stop' | 'length' } {
  // A broken upstream writes what it writes, and believes it stopped naturally.
  if (plan.ignoreMaxTokens !== null) {
    return { tokens: plan.ignoreMaxTokens, reasoning: reasoningBudget, finish: 'stop' };
  }
  const reasoning = Math.min(reasoningBudget, shape.cap);
  const cap = shape.cap - reasoning;
  const wanted = shape.fillCap
    ? cap
    : Math.max(wantedTokens(plan.completion, cap, seed), shape.minTokens - reasoning);
  return { tokens: Math.min(wanted, cap), reasoning, finish: wanted >= cap ? 'length' : 'stop' };
}
