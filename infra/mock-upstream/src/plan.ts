import type { IncomingHttpHeaders } from 'node:http';
import { Err, Ok, type Result } from '@holdfast/runtime';
import {
  FAILURES,
  type Behaviour,
  type CompletionLength,
  type Failure,
  type FailureKind,
  STREAM_ERRORS,
  type StreamErrorKind,
  type OverReport,
  type ToolPrompt,
} from './behaviour.js';
import type { MockState } from './state.js';

/** How one model request behaves: the configured behaviour with its headers applied. */
export interface Plan {
  firstTokenLatencyMs: number;
  tokenDelayMs: number;
  completion: CompletionLength;
  /** From `x-mock-fail`; without it the call takes a queued failure when it starts. */
  failure: Failure | undefined;
  ignoreMaxTokens: number | null;
  overReport: OverReport;
  /** OpenAI surfaces: prompt tokens reported as served from the prompt cache. */
  cachedTokens: number;
  /** Reasoning tokens at `medium` effort, for requests that ask for reasoning. */
  reasoningTokens: number;
  /** Chat: the call's audio prompt tokens (undefined: per part); audio output (null: all). */
  audioPromptTokens: number | undefined;
  audioCompletionTokens: number | null;
  /** From `x-mock-service-tier`: the tier the call is reported served at (tiers.ts). */
  serviceTier: string | undefined;
  /** The long-context line (null: none): a record above it is marked `longContext`. */
  longContextAbove: number | null;
  /** Anthropic's tool-use system prompt, by tool_choice (anthropic/count.ts). */
  toolPrompt: ToolPrompt;
  /** Uses of each provider-run tool billed per use the request offers (server-tools.ts). */
  toolUses: number;
  /** Report `toolUses` whatever the request's bound (`max_uses`, `max_tool_calls`) says. */
  ignoreToolBound: boolean;
  /** The input tokens a provider-run tool reads per use (server-tools.ts). */
  toolInputTokens: number;
  /** The tool types a stored prompt (`pmpt_...`) carries (server-tools.ts). */
  storedPromptTools: readonly string[];
}

/** An `x-mock-*` header the mock cannot read. */
interface InvalidHeaders {
  code: 'invalid_mock_header';
  message: string;
}

/**
 * Per-request overrides, for clients that can set headers but not odd bodies (the official
 * clients: `create(body, { headers })`):
 * - `x-mock-latency-ms`: first-token latency; `x-mock-token-delay-ms`: delay between tokens;
 * - `x-mock-completion-tokens`: reply length before the max_tokens cap;
 * - `x-mock-fail: 500|429|overloaded|error|hang|drop`, with `x-mock-fail-after-tokens` (a stream
 *   breaks after that many content tokens), `x-mock-retry-after` (seconds, 429) and
 *   `x-mock-stream-error: overloaded|rate_limit|server|failed` (what an `error` break says);
 * - `x-mock-ignore-max-tokens: N`: write N tokens per choice whatever the caps say;
 * - `x-mock-overreport-prompt`, `x-mock-overreport-completion` (extra tokens) and
 *   `x-mock-overreport-factor` (a multiplier): usage reports and bills more than was generated;
 * - `x-mock-cached-tokens`: OpenAI surfaces report that many prompt tokens as cached;
 * - `x-mock-reasoning-tokens`: reasoning tokens at medium effort;
 * - `x-mock-audio-prompt-tokens`, `x-mock-audio-completion-tokens`: a chat call's audio input
 *   (when it has `input_audio` parts) and audio output (when it asks for audio);
 * - `x-mock-service-tier`: the service tier the call is reported (and billed) at;
 * - `x-mock-long-context-above: N`: the call's long-context line (its record's `longContext`);
 * - `x-mock-tool-prompt-auto: N`, `x-mock-tool-prompt-forced: N`: Anthropic's tool-use system
 *   prompt when tool_choice is auto/none, any/tool (a newer model's larger one);
 * - `x-mock-tool-uses: N`: each provider-run tool billed per use the request offers is used N
 *   times, within its bound (`max_uses`, `max_tool_calls`); with `x-mock-ignore-tool-bound: 1`
 *   whatever the bound (a broken upstream);
 * - `x-mock-tool-input-tokens: N`: the input a provider-run tool reads, billed per use (once for
 *   a tool whose uses are not counted).
 * - `x-mock-stored-prompt-tools: web_search,image_generation`: the tools a Responses stored
 *   prompt (`prompt.id` `pmpt_...`) carries, used as if the request offered them.
 * Each header wins over the configured behaviour for this request only.
 */
export function planRequest(
  headers: IncomingHttpHeaders,
  state: MockState,
): Result<Plan, InvalidHeaders> {
  const errors: string[] = [];
  const number = (name: string, integer: boolean): number | undefined => {
    const raw = headers[name];
    if (raw === undefined) return undefined;
    const value = Number(raw);
    const valid = typeof raw === 'string' && raw.trim() !== '' && value >= 0;
    if (valid && (integer ? Number.isInteger(value) : Number.isFinite(value))) return value;
    errors.push(`${name} must be a non-negative ${integer ? 'integer' : 'number'}`);
    return undefined;
  };
  const int = (name: string) => number(name, true);
  const latency = int('x-mock-latency-ms');
  const delay = int('x-mock-token-delay-ms');
  const tokens = int('x-mock-completion-tokens');
  const afterTokens = int('x-mock-fail-after-tokens') ?? 0;
  const retryAfterS = int('x-mock-retry-after') ?? 1;
  const ignoreMaxTokens = int('x-mock-ignore-max-tokens');
  const extraPrompt = int('x-mock-overreport-prompt');
  const extraCompletion = int('x-mock-overreport-completion');
  const factor = number('x-mock-overreport-factor', false);
  const cachedTokens = int('x-mock-cached-tokens');
  const reasoningTokens = int('x-mock-reasoning-tokens');
  const audioPromptTokens = int('x-mock-audio-prompt-tokens');
  const audioCompletionTokens = int('x-mock-audio-completion-tokens');
  const longContextAbove = int('x-mock-long-context-above');
  const toolPromptAuto = int('x-mock-tool-prompt-auto');
  const toolPromptForced = int('x-mock-tool-prompt-forced');
  const toolUses = int('x-mock-tool-uses');
  const toolInputTokens = int('x-mock-tool-input-tokens');
  const ignoreToolBound = headers['x-mock-ignore-tool-bound'];
  if (ignoreToolBound !== undefined && ignoreToolBound !== '1' && ignoreToolBound !== '0') {
    errors.push('x-mock-ignore-tool-bound must be 1 or 0');
  }
  const promptTools = headers['x-mock-stored-prompt-tools'];
  if (
    promptTools !== undefined &&
    !(typeof promptTools === 'string' && /^[a-z0-9_,]*$/.test(promptTools))
  ) {
    errors.push('x-mock-stored-prompt-tools must be tool types joined by ,');
  }
  const tierHeader = headers['x-mock-service-tier'];
  const serviceTier =
    typeof tierHeader === 'string' && /^[a-z][a-z0-9_]{0,31}$/.test(tierHeader)
      ? tierHeader
      : undefined;
  if (tierHeader !== undefined && serviceTier === undefined) {
    errors.push('x-mock-service-tier must match [a-z][a-z0-9_]{0,31}');
  }
  const fail = headers['x-mock-fail'];
  if (fail !== undefined && !(typeof fail === 'string' && isFailure(fail))) {
    errors.push(`x-mock-fail must be one of ${FAILURES.join(', ')}`);
  }
  const streamError = headers['x-mock-stream-error'];
  if (
    streamError !== undefined &&
    !(typeof streamError === 'string' && isStreamError(streamError))
  ) {
    errors.push(`x-mock-stream-error must be one of ${STREAM_ERRORS.join(', ')}`);
  }
  if (errors.length > 0) return Err({ code: 'invalid_mock_header', message: errors.join('; ') });

  const b: Behaviour = state.behaviour;
  return Ok({
    firstTokenLatencyMs: latency ?? b.firstTokenLatencyMs,
    tokenDelayMs: delay ?? b.tokenDelayMs,
    completion: tokens === undefined ? b.completion : { mode: 'fixed', tokens },
    failure:
      typeof fail === 'string' && isFailure(fail)
        ? {
            kind: fail,
            retryAfterS,
            afterTokens,
            ...(typeof streamError === 'string' && isStreamError(streamError)
              ? { streamError }
              : {}),
          }
        : undefined,
    ignoreMaxTokens: ignoreMaxTokens ?? b.ignoreMaxTokens,
    overReport: {
      promptTokens: extraPrompt ?? b.overReport.promptTokens,
      completionTokens: extraCompletion ?? b.overReport.completionTokens,
      factor: factor ?? b.overReport.factor,
    },
    cachedTokens: cachedTokens ?? 0,
    reasoningTokens: reasoningTokens ?? b.reasoningTokens,
    audioPromptTokens,
    audioCompletionTokens: audioCompletionTokens ?? b.audioCompletionTokens,
    serviceTier,
    longContextAbove: longContextAbove ?? b.longContextAboveTokens,
    toolPrompt: {
      auto: toolPromptAuto ?? b.toolPromptTokens.auto,
      forced: toolPromptForced ?? b.toolPromptTokens.forced,
    },
    toolUses: toolUses ?? b.toolUses,
    ignoreToolBound: ignoreToolBound === undefined ? b.ignoreToolBound : ignoreToolBound === '1',
    toolInputTokens: toolInputTokens ?? b.toolInputTokens,
    storedPromptTools:
      typeof promptTools === 'string'
        ? promptTools.split(',').filter(Boolean)
        : b.storedPromptTools,
  });
}

function isFailure(value: string): value is FailureKind {
  return (FAILURES as readonly string[]).includes(value);
}

function isStreamError(value: string): value is StreamErrorKind {
  return (STREAM_ERRORS as readonly string[]).includes(value);
}
