import type { IncomingHttpHeaders } from 'node:http';
import {
  FAILURES,
  type Behaviour,
  type CompletionLength,
  type Failure,
  type FailureKind,
} from './behaviour.js';
import type { MockState } from './state.js';

/** How one model request behaves: the configured behaviour with its headers applied. */
export interface Plan {
  firstTokenLatencyMs: number;
  tokenDelayMs: number;
  completion: CompletionLength;
  failure: Failure | undefined;
}

/**
 * Per-request overrides, for clients that can set headers but not odd bodies (the official
 * `openai` client: `create(body, { headers })`):
 * - `x-mock-latency-ms`: first-token latency; `x-mock-token-delay-ms`: delay between tokens;
 * - `x-mock-completion-tokens`: reply length before the max_tokens cap;
 * - `x-mock-fail: 500|429|hang|drop`, with `x-mock-fail-after-tokens` (drop/hang a stream after
 *   that many content tokens) and `x-mock-retry-after` (seconds, 429).
 * Without `x-mock-fail`, a failure queued by `POST /_mock/fail-next` applies.
 */
export function planRequest(
  headers: IncomingHttpHeaders,
  state: MockState,
): { ok: true; plan: Plan } | { ok: false; message: string } {
  const errors: string[] = [];
  const int = (name: string): number | undefined => {
    const raw = headers[name];
    if (raw === undefined) return undefined;
    const value = Number(raw);
    if (typeof raw === 'string' && Number.isInteger(value) && value >= 0) return value;
    errors.push(`${name} must be a non-negative integer`);
    return undefined;
  };
  const latency = int('x-mock-latency-ms');
  const delay = int('x-mock-token-delay-ms');
  const tokens = int('x-mock-completion-tokens');
  const afterTokens = int('x-mock-fail-after-tokens') ?? 0;
  const retryAfterS = int('x-mock-retry-after') ?? 1;
  const fail = headers['x-mock-fail'];
  if (fail !== undefined && !(typeof fail === 'string' && isFailure(fail))) {
    errors.push(`x-mock-fail must be one of ${FAILURES.join(', ')}`);
  }
  if (errors.length > 0) return { ok: false, message: errors.join('; ') };

  const b: Behaviour = state.behaviour;
  return {
    ok: true,
    plan: {
      firstTokenLatencyMs: latency ?? b.firstTokenLatencyMs,
      tokenDelayMs: delay ?? b.tokenDelayMs,
      completion: tokens === undefined ? b.completion : { mode: 'fixed', tokens },
      failure:
        typeof fail === 'string' && isFailure(fail)
          ? { kind: fail, retryAfterS, afterTokens }
          : state.takeFailure(),
    },
  };
}

function isFailure(value: string): value is FailureKind {
  return (FAILURES as readonly string[]).includes(value);
}
