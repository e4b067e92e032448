import type { FastifyReply } from 'fastify';
import type { CapacityView } from './capacity.js';
import { errorBody } from './openai.js';

/** The failures every surface answers, each in its own shape. */
export type ErrorKind = 'invalid' | 'auth' | 'not_found' | 'rate_limit' | 'server' | 'overloaded';

export interface ErrorDetail {
  /** OpenAI only: the error `type` (e.g. `tokens` for a TPM limit), `code` and `param`. */
  type?: string;
  code?: string | null;
  param?: string | null;
}

/** One API family's conventions: error bodies and rate-limit headers. */
export interface Surface {
  readonly name: 'openai' | 'anthropic';
  error(kind: ErrorKind, message: string, detail?: ErrorDetail): { status: number; body: unknown };
  rateLimitHeaders(view: CapacityView): Record<string, string>;
}

const OPENAI_ERRORS = {
  invalid: [400, 'invalid_request_error', null],
  auth: [401, 'invalid_request_error', 'invalid_api_key'],
  not_found: [404, 'invalid_request_error', null],
  rate_limit: [429, 'requests', 'rate_limit_exceeded'],
  server: [500, 'server_error', null],
  overloaded: [503, 'server_error', 'overloaded'],
} as const satisfies Record<ErrorKind, readonly [number, string, string | null]>;

/** `6m0s`, `1.5s`, `20ms`: the duration format of OpenAI's `x-ratelimit-reset-*` headers. */
export function formatReset(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.ceil(ms))}ms`;
  const minutes = Math.floor(ms / 60_000);
  const seconds = Number(((ms - minutes * 60_000) / 1000).toFixed(3));
  return minutes > 0 ? `${minutes}m${seconds}s` : `${seconds}s`;
}

/** The limit, remaining and reset headers of whichever limits are set. */
function limitHeaders(
  view: CapacityView,
  name: (kind: 'requests' | 'tokens', field: 'limit' | 'remaining' | 'reset') => string,
  reset: (ms: number) => string,
): Record<string, string> {
  const headers: Record<string, string> = {};
  const limits = [
    ['requests', view.limitRequests, view.remainingRequests, view.resetRequestsMs],
    ['tokens', view.limitTokens, view.remainingTokens, view.resetTokensMs],
  ] as const;
  for (const [kind, limit, remaining, resetMs] of limits) {
    if (limit === null) continue;
    headers[name(kind, 'limit')] = String(limit);
    headers[name(kind, 'remaining')] = String(remaining);
    headers[name(kind, 'reset')] = reset(resetMs);
  }
  return headers;
}

export const OPENAI: Surface = {
  name: 'openai',
  error(kind, message, detail = {}) {
    const [status, type, code] = OPENAI_ERRORS[kind];
    return {
      status,
      body: errorBody(message, detail.type ?? type, detail.code ?? code, detail.param ?? null),
    };
  },
  rateLimitHeaders: (view) =>
    limitHeaders(view, (kind, field) => `x-ratelimit-${field}-${kind}`, formatReset),
};

const ANTHROPIC_ERRORS = {
  invalid: [400, 'invalid_request_error'],
  auth: [401, 'authentication_error'],
  not_found: [404, 'not_found_error'],
  rate_limit: [429, 'rate_limit_error'],
  server: [500, 'api_error'],
  overloaded: [529, 'overloaded_error'],
} as const satisfies Record<ErrorKind, readonly [number, string]>;

export const ANTHROPIC: Surface = {
  name: 'anthropic',
  error(kind, message) {
    const [status, type] = ANTHROPIC_ERRORS[kind];
    return { status, body: { type: 'error', error: { type, message } } };
  },
  // Anthropic's reset headers are RFC 3339 times, not durations.
  rateLimitHeaders: (view) =>
    limitHeaders(
      view,
      (kind, field) => `anthropic-ratelimit-${kind}-${field}`,
      (ms) => new Date(Date.now() + ms).toISOString().replace(/\.\d{3}Z$/, 'Z'),
    ),
};

export function sendError(
  reply: FastifyReply,
  surface: Surface,
  kind: ErrorKind,
  message: string,
  detail?: ErrorDetail,
) {
  const { status, body } = surface.error(kind, message, detail);
  return reply.code(status).send(body);
}
