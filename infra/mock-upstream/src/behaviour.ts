import { z } from 'zod';
import { Counting } from './counting.js';
import { OpenWeightFamily } from './open-weight/index.js';
import { SERVER_TOOL_INPUT_TOKENS } from './server-tools.js';

/**
 * How many tokens a reply has before the `max_tokens` cap: a fixed number, a fraction of the
 * cap, or uniform between min and max (seeded by the config seed and the prompt, so the same
 * request always gets the same length).
 */
export const CompletionLength = z.discriminatedUnion('mode', [
  z.strictObject({ mode: z.literal('fixed'), tokens: z.int().min(0).max(1_000_000) }),
  z.strictObject({ mode: z.literal('fraction'), fraction: z.number().min(0).max(1) }),
  z
    .strictObject({
      mode: z.literal('uniform'),
      min: z.int().min(0).max(1_000_000),
      max: z.int().min(0).max(1_000_000),
    })
    .refine((u) => u.min <= u.max, { message: 'min must not exceed max' }),
]);
export type CompletionLength = z.infer<typeof CompletionLength>;

/**
 * Usage inflation: a reported (and billed) count is `ceil(actual * factor) + extra`. The extra
 * prompt tokens are uncached ones; cached, cache-write and reasoning counts stay true.
 */
export const OverReport = z.strictObject({
  promptTokens: z.int().min(0).max(100_000_000).default(0),
  completionTokens: z.int().min(0).max(100_000_000).default(0),
  factor: z.number().min(0).max(1_000).default(1),
});
export type OverReport = z.infer<typeof OverReport>;

/**
 * An account limit as a provider enforces it, over a sliding 60 s window. `count` says what a
 * request costs: `requested` (OpenAI's documented rule: the prompt plus the output it may ask
 * for, `max_tokens` x choices, charged on arrival) or `usage` (the prompt on arrival, the
 * output actually written when the call ends).
 */
export const Capacity = z.strictObject({
  tokensPerMinute: z.int().min(1).nullable().default(null),
  requestsPerMinute: z.int().min(1).nullable().default(null),
  count: z.enum(['requested', 'usage']).default('requested'),
});
export type Capacity = z.infer<typeof Capacity>;

/**
 * Anthropic's tool-use system prompt, which it adds to the input of every Messages call with
 * `tools` (count_tokens included): `auto` when tool_choice is auto or none, `forced` when it is
 * any or tool. The default is Anthropic's figure for Claude 4-era models (346 / 313); newer models
 * are reported larger (Sonnet 4.6 497 / 589, Opus 4.7 675 / 804).
 */
export const ToolPrompt = z.strictObject({
  auto: z.int().min(0).max(1_000_000).default(346),
  forced: z.int().min(0).max(1_000_000).default(313),
});
export type ToolPrompt = z.infer<typeof ToolPrompt>;

/** Runtime behaviour: set at startup, changed by `PUT /_mock/config`, restored by reset. */
export const Behaviour = z.strictObject({
  /** Before the first content token (streaming) or before the whole response. */
  firstTokenLatencyMs: z.int().min(0).max(600_000),
  /** Between two tokens (a non-streaming reply waits for all of them). */
  tokenDelayMs: z.number().min(0).max(60_000),
  completion: CompletionLength,
  /** The cap when a request sets neither max_tokens nor max_completion_tokens. */
  maxOutputTokens: z.int().min(1).max(1_000_000),
  /** Mixed into every generated text and length. */
  seed: z.int(),
  /** What `GET /v1/models` lists. Any model name is served. */
  models: z.array(z.string().min(1)).min(1),
  embeddingDimensions: z.int().min(1).max(8_192),
  /**
   * A broken upstream: every reply (each choice) is this many tokens, whatever max_tokens or a
   * vendor length field says. Null: caps are obeyed. Header: `x-mock-ignore-max-tokens`.
   */
  ignoreMaxTokens: z.int().min(0).max(1_000_000).nullable(),
  /** A provider whose usage (and bill) says more than it generated; see `OverReport`. */
  overReport: OverReport,
  /** The account's rate limit; null: unlimited. See capacity.ts. */
  capacity: Capacity.nullable(),
  /**
   * Reasoning tokens a request that asks for reasoning spends at `medium` effort (Responses
   * `reasoning`, chat `reasoning_effort`, Anthropic `thinking`); other efforts scale it.
   */
  reasoningTokens: z.int().min(0).max(1_000_000),
  /**
   * Chat audio (OpenAI's audio models): prompt tokens each `input_audio` part takes (within the
   * prompt), and the output tokens that are audio when the call asks for audio output (null:
   * all of the output but reasoning). Headers: `x-mock-audio-prompt-tokens` (the call's),
   * `x-mock-audio-completion-tokens`.
   */
  audioPromptTokensPerPart: z.int().min(0).max(1_000_000),
  audioCompletionTokens: z.int().min(0).max(1_000_000).nullable(),
  /**
   * Service tiers (tiers.ts): the share of calls served at priority that are downgraded
   * (OpenAI's priority to `default`, Anthropic's to `standard`), decided in turn so the share
   * is exact; and whether the Anthropic account has Priority Tier capacity (`auto` calls are
   * then served at `priority`). Header: `x-mock-service-tier` (the tier reported).
   */
  downgradePriority: z.number().min(0).max(1),
  priorityTier: z.boolean(),
  /**
   * A long-context line: a call whose billed input (cache reads and writes included) is above
   * it is marked `longContext` on its record, as the provider bills it at its long-context
   * rates (Anthropic's 1M window above 200,000, GPT-5.4 above 272,000). Null: no line.
   * Header: `x-mock-long-context-above`.
   */
  longContextAboveTokens: z.int().min(1).max(100_000_000).nullable(),
  /**
   * Whether `POST /v1/responses/input_tokens` is served; false: it answers 404, as on an
   * upstream without it (vLLM, llama-server).
   */
  responsesInputTokens: z.boolean(),
  /**
   * The counting endpoints' own latency and requests-per-minute limit (see `Counting`):
   * count_tokens and input_tokens.
   */
  counting: Counting,
  /**
   * Anthropic's tool-use system prompt (see `ToolPrompt`). Headers: `x-mock-tool-prompt-auto`,
   * `x-mock-tool-prompt-forced`.
   */
  toolPromptTokens: ToolPrompt,
  /**
   * Provider-run tools billed per use (server-tools.ts): how many times the call uses each
   * such tool it offers (within its bound: Anthropic `max_uses`, Responses `max_tool_calls`),
   * and whether the bound is ignored (a broken upstream). Headers: `x-mock-tool-uses`,
   * `x-mock-ignore-tool-bound`.
   */
  toolUses: z.int().min(0).max(1_000_000),
  ignoreToolBound: z.boolean(),
  /**
   * The input tokens a provider-run tool reads (search results, a fetched page, tool output),
   * billed for each use of a tool whose uses are counted, once for any other (server-tools.ts).
   * Header: `x-mock-tool-input-tokens`.
   */
  toolInputTokens: z.int().min(0).max(1_000_000),
  /**
   * The tool types a Responses stored prompt carries (a `prompt.id` starting `pmpt_`), which
   * the request does not show: used as the request's own tools are (`toolUses` of each
   * billed per use, within `max_tool_calls`). Header: `x-mock-stored-prompt-tools` (types
   * joined by `,`).
   */
  storedPromptTools: z.array(z.string().min(1).max(64)).max(16),
  /** Anthropic prompt caching: a cache_control prefix shorter than this is not cached. */
  promptCacheMinTokens: z.int().min(1).max(1_000_000),
  /** How many call records the log keeps (oldest dropped first); totals are never dropped. */
  logLimit: z.int().min(1).max(1_000_000),
  /**
   * Models served as a vLLM server runs an open-weight family (model id -> family): chat
   * prompts billed as the family's chat template renders them, counted with its vocabulary
   * (open-weight/). Other models keep their default counting (OpenAI's framing, or the
   * ChatML-like o200k render of template.ts).
   */
  openWeight: z.record(z.string().min(1), OpenWeightFamily),
});
export type Behaviour = z.infer<typeof Behaviour>;

export const BehaviourPatch = Behaviour.partial();
// The input type: nested objects may leave out fields that have defaults.
export type BehaviourPatch = z.input<typeof BehaviourPatch>;

export const DEFAULT_BEHAVIOUR: Behaviour = {
  firstTokenLatencyMs: 0,
  tokenDelayMs: 0,
  completion: { mode: 'fixed', tokens: 50 },
  maxOutputTokens: 16_384,
  seed: 0,
  models: ['gpt-4o-mini', 'gpt-4o', 'gpt-4', 'gpt-3.5-turbo', 'text-embedding-3-small'],
  embeddingDimensions: 1536,
  ignoreMaxTokens: null,
  overReport: { promptTokens: 0, completionTokens: 0, factor: 1 },
  capacity: null,
  reasoningTokens: 128,
  audioPromptTokensPerPart: 50,
  audioCompletionTokens: null,
  downgradePriority: 0,
  priorityTier: false,
  longContextAboveTokens: null,
  responsesInputTokens: true,
  counting: { latencyMs: 0, requestsPerMinute: null, failStatus: null },
  toolPromptTokens: { auto: 346, forced: 313 },
  toolUses: 0,
  ignoreToolBound: false,
  toolInputTokens: SERVER_TOOL_INPUT_TOKENS,
  storedPromptTools: [],
  promptCacheMinTokens: 1024,
  logLimit: 10_000,
  openWeight: {},
};

/** `fixed:64`, `fraction:0.5` or `uniform:16-512`, the env/CLI form of a CompletionLength. */
export function parseCompletionSpec(spec: string): CompletionLength | undefined {
  const [mode, value = ''] = spec.split(':', 2);
  const range = /^(\d+)-(\d+)$/.exec(value);
  const candidate =
    mode === 'fixed'
      ? { mode, tokens: Number(value) }
      : mode === 'fraction'
        ? { mode, fraction: Number(value) }
        : mode === 'uniform' && range
          ? { mode, min: Number(range[1]), max: Number(range[2]) }
          : undefined;
  const parsed = CompletionLength.safeParse(candidate);
  return parsed.success ? parsed.data : undefined;
}

/**
 * Injected failures. `overloaded` answers 529 overloaded_error on the Anthropic surface and 503
 * on the OpenAI ones; `error` is a stream that breaks off with the surface's error event after
 * `afterTokens` tokens (a 500 for a JSON reply).
 */
export const FAILURES = ['500', '429', 'overloaded', 'error', 'hang', 'drop'] as const;
export type FailureKind = (typeof FAILURES)[number];

/**
 * What an injected `error` break says, in the surface's own shape: `overloaded` (Anthropic
 * overloaded_error, OpenAI `server_is_overloaded`), `rate_limit` (rate_limit_error /
 * `rate_limit_exceeded`), `server` (api_error / `server_error`), `failed` (Responses: a
 * `response.failed` event with the usage written so far instead of an `error` event; the
 * others: as `server`). Unset: the surface's default (Anthropic overloaded, OpenAI server).
 */
export const STREAM_ERRORS = ['overloaded', 'rate_limit', 'server', 'failed'] as const;
export type StreamErrorKind = (typeof STREAM_ERRORS)[number];

export interface Failure {
  kind: FailureKind;
  /** 429: seconds in Retry-After. */
  retryAfterS: number;
  /** drop/hang on a stream: content tokens sent before the socket is destroyed or stalls. */
  afterTokens: number;
  /** `error`: what the stream's error event says (STREAM_ERRORS). */
  streamError?: StreamErrorKind;
}

/** Body of `POST /_mock/fail-next`: the next `count` model requests fail this way. */
export const FailNext = z.strictObject({
  status: z.union([z.literal(500), z.literal(429), z.literal(529), z.enum(FAILURES)]),
  count: z.int().min(1).max(1_000_000).default(1),
  retryAfter: z.number().min(0).max(3_600).default(1),
  afterTokens: z.int().min(0).max(1_000_000).default(0),
  streamError: z.enum(STREAM_ERRORS).optional(),
});
export type FailNextInput = z.input<typeof FailNext>;

export function toFailure(spec: z.infer<typeof FailNext>): Failure {
  return {
    kind: spec.status === 529 ? 'overloaded' : (String(spec.status) as FailureKind),
    retryAfterS: spec.retryAfter,
    afterTokens: spec.afterTokens,
    ...(spec.streamError ? { streamError: spec.streamError } : {}),
  };
}
