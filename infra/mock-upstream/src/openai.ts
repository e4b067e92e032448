import type { FastifyReply } from 'fastify';
import type { Billed } from './usage.js';

/** OpenAI's error body. */
export function errorBody(
  message: string,
  type: string,
  code: string | null = null,
  param: string | null = null,
): { error: { message: string; type: string; param: string | null; code: string | null } } {
  return { error: { message, type, param, code } };
}

export function sendInvalid(reply: FastifyReply, message: string, param: string | null = null) {
  return reply.code(400).send(errorBody(message, 'invalid_request_error', null, param));
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number; audio_tokens: number };
  completion_tokens_details: {
    reasoning_tokens: number;
    audio_tokens: number;
    accepted_prediction_tokens: number;
    rejected_prediction_tokens: number;
  };
}

/** Chat Completions `usage` for a bill. */
export function usage(b: Billed): Usage {
  return {
    prompt_tokens: b.promptTokens,
    completion_tokens: b.completionTokens,
    total_tokens: b.promptTokens + b.completionTokens,
    prompt_tokens_details: { cached_tokens: b.cachedTokens, audio_tokens: b.audioPromptTokens },
    completion_tokens_details: {
      reasoning_tokens: b.reasoningTokens,
      audio_tokens: b.audioCompletionTokens,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
}

export const SYSTEM_FINGERPRINT = 'fp_holdfast_mock';

export type FinishReason = 'stop' | 'length';

/** Builds the `chat.completion.chunk` objects of one streamed reply. */
export function chunkFactory(
  id: string,
  model: string,
  includeUsage: boolean,
  serviceTier: string,
) {
  const created = Math.floor(Date.now() / 1000);
  const base = {
    id,
    object: 'chat.completion.chunk',
    created,
    model,
    service_tier: serviceTier,
    system_fingerprint: SYSTEM_FINGERPRINT,
  };
  // With include_usage every chunk carries `usage: null` and a last chunk carries the usage.
  const tail = includeUsage ? { usage: null } : {};
  const choice = (index: number, delta: object, finish: FinishReason | null) => ({
    ...base,
    choices: [{ index, delta, logprobs: null, finish_reason: finish }],
    ...tail,
  });
  return {
    role: (index: number) => choice(index, { role: 'assistant', content: '', refusal: null }, null),
    content: (index: number, content: string) => choice(index, { content }, null),
    /** An audio reply's id (its bytes and transcript are not modelled). */
    audio: (index: number, audio: { id: string; expires_at: number }) =>
      choice(index, { audio: { ...audio, data: '', transcript: '' } }, null),
    finish: (index: number, reason: FinishReason) => choice(index, {}, reason),
    usage: (u: Usage) => ({ ...base, choices: [], usage: u }),
  };
}

export function sse(data: unknown): string {
  return `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;
}

/**
 * OpenAI's in-stream error (chat's `data: {"error": ...}`, the `code` of a Responses `error`
 * event or `response.failed`'s `error`), by what an injected break says.
 */
export const OPENAI_STREAM_ERRORS = {
  overloaded: {
    type: 'server_error',
    code: 'server_is_overloaded',
    message: 'The server is overloaded. (mock)',
  },
  rate_limit: {
    type: 'tokens',
    code: 'rate_limit_exceeded',
    message: 'Rate limit reached. (mock)',
  },
  server: {
    type: 'server_error',
    code: 'server_error',
    message: 'The server had an error while processing your request. (mock)',
  },
  failed: {
    type: 'server_error',
    code: 'server_error',
    message: 'The server had an error while processing your request. (mock)',
  },
} as const;
