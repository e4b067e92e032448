import type { OverReport } from './behaviour.js';
import type { ToolUses } from './server-tools.js';

/** The prompt side of one call, true counts. The cache counts are parts of `tokens`. */
export interface PromptCount {
  tokens: number;
  /** Read from a prompt cache. */
  cached: number;
  /** Written to Anthropic's 5-minute and 1-hour caches. */
  cacheWrite5m: number;
  cacheWrite1h: number;
}

export const uncachedPrompt = (tokens: number): PromptCount => ({
  tokens,
  cached: 0,
  cacheWrite5m: 0,
  cacheWrite1h: 0,
});

/** A chat call's audio (OpenAI's audio models): the tokens its input audio and output take. */
export interface AudioCount {
  /** Of the prompt: its `input_audio` parts. */
  prompt: number;
  /** Of the output, at most: 0 unless the call asked for audio output. */
  completion: number;
}

const NO_AUDIO: AudioCount = { prompt: 0, completion: 0 };

/**
 * What a provider reports and bills for one call, OpenAI-style: `promptTokens` is all input
 * (cached, cache writes and audio included), `completionTokens` all output (reasoning and
 * audio included).
 */
export interface Billed {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  cacheWrite5mTokens: number;
  cacheWrite1hTokens: number;
  reasoningTokens: number;
  audioPromptTokens: number;
  audioCompletionTokens: number;
  /** The service tier it was served at, as reported (tiers.ts): what it is priced at. */
  serviceTier: string;
  /** Its input (cache parts included) is above the call's long-context line: billed long. */
  longContext: boolean;
  /** Uses of provider-run tools billed per use, by kind (server-tools.ts): billed per use. */
  toolUses: ToolUses;
}

/**
 * The bill for the true counts, inflated as `over` says. The extra prompt tokens are uncached
 * ones, so cache and reasoning parts stay true (and the totals never fall below them). Audio
 * output is the output that is not reasoning, up to `audio.completion`; audio input is part
 * of the prompt too.
 */
export function bill(
  prompt: PromptCount,
  completion: number,
  reasoning: number,
  over: OverReport,
  audio: AudioCount = NO_AUDIO,
  serviceTier = 'default',
  longContextAbove: number | null = null,
  toolUses: ToolUses = {},
): Billed {
  const inflate = (n: number, extra: number) => Math.ceil(n * over.factor) + extra;
  const cacheParts = prompt.cached + prompt.cacheWrite5m + prompt.cacheWrite1h;
  const promptTokens = Math.max(
    cacheParts + audio.prompt,
    inflate(prompt.tokens, over.promptTokens),
  );
  return {
    promptTokens,
    completionTokens: Math.max(reasoning, inflate(completion, over.completionTokens)),
    cachedTokens: prompt.cached,
    cacheWrite5mTokens: prompt.cacheWrite5m,
    cacheWrite1hTokens: prompt.cacheWrite1h,
    reasoningTokens: reasoning,
    audioPromptTokens: audio.prompt,
    audioCompletionTokens: Math.min(audio.completion, Math.max(0, completion - reasoning)),
    serviceTier,
    longContext: longContextAbove !== null && promptTokens > longContextAbove,
    toolUses,
  };
}

/** The bill of a call that never reached the model (an error, a refusal). */
export const NOTHING: Billed = {
  promptTokens: 0,
  completionTokens: 0,
  cachedTokens: 0,
  cacheWrite5mTokens: 0,
  cacheWrite1hTokens: 0,
  reasoningTokens: 0,
  audioPromptTokens: 0,
  audioCompletionTokens: 0,
  serviceTier: 'default',
  longContext: false,
  toolUses: {},
};
