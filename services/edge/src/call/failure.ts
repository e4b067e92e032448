import { EdgeError } from '../errors.js';
import type { Usage } from '@holdfast/events';
import type { Hold } from '../authority/holds.js';
import type { AbortWhy, Failure } from '../upstream/client.js';
import { rateLimitedMessage } from '../upstream/rate-limited.js';
import { addUsage } from '../surfaces/usage.js';

const MAX_CLIENT_RETRY_WAIT_MS = 60_000;

/** The error a client gets when the upstream call failed (undefined: the client is gone). */
export function upstreamError(f: Failure): EdgeError | undefined {
  switch (f.kind) {
    case 'status':
      return statusError(f);
    case 'connect':
      return new EdgeError({
        code: 'upstream_error',
        message: 'The model upstream could not be reached.',
      });
    case 'timeout':
      return new EdgeError({
        code: 'upstream_timeout',
        message: 'The model upstream did not answer in time.',
      });
    case 'dropped':
      return new EdgeError({
        code: 'upstream_error',
        message: 'The connection to the model upstream was lost.',
      });
    case 'aborted':
      return abortError(f.why);
    case 'busy':
      return new EdgeError({
        code: 'concurrency_limit',
        message: `${f.message} Retry when one ends.`,
        headers: { 'retry-after': '1' },
      });
  }
}

function statusError(f: Extract<Failure, { kind: 'status' }>): EdgeError {
  if (f.status === 429) {
    const headers: Record<string, string> = {};
    if (f.retryAfterMs !== undefined) {
      headers['retry-after'] = String(Math.max(1, Math.ceil(f.retryAfterMs / 1_000)));
      if (f.retryAfterMs > MAX_CLIENT_RETRY_WAIT_MS) headers['x-should-retry'] = 'false';
    }
    return new EdgeError({
      code: 'upstream_rate_limited',
      message: rateLimitedMessage(f),
      headers,
    });
  }
  if (f.status === 413) {
    return new EdgeError({
      code: 'request_too_large',
      message: `The upstream rejected the request as too large: ${f.message}`,
    });
  }
  if (f.status === 400 || f.status === 422) {
    return new EdgeError({
      code: 'invalid_request',
      message: `The upstream rejected the request: ${f.message}`,
    });
  }
  if (f.status === 503 || f.status === 529) {
    return new EdgeError({
      code: 'upstream_overloaded',
      message: `The model upstream is overloaded (${f.status})${tries(f)}. Retry later.`,
    });
  }
  return new EdgeError({
    code: 'upstream_error',
    message: `The model upstream failed (${f.status})${tries(f)}.`,
  });
}

/** `, after 3 attempts`, when the edge retried. */
function tries(f: Extract<Failure, { kind: 'status' }>): string {
  const n = f.retries?.attempts ?? 1;
  return n > 1 ? `, after ${n} attempts` : '';
}

function abortError(why: AbortWhy): EdgeError | undefined {
  switch (why) {
    case 'client_disconnected':
      return undefined;
    case 'suspended':
      return new EdgeError({
        code: 'tenant_suspended',
        message: 'The team was suspended while this call was in flight; the call was ended.',
      });
    case 'output_limit':
      return new EdgeError({
        code: 'upstream_error',
        message: 'The upstream exceeded max_tokens.',
      });
    case 'budget_exhausted':
      return new EdgeError({
        code: 'budget_exceeded',
        message:
          'The budget could not cover more output, so the call was ended (finish_reason length).',
      });
  }
}

/**
 * Closes the hold of a call whose upstream never answered 2xx. If the provider may have read
 * the prompt (the request went out and then timed out, dropped, or was aborted), the call is
 * settled with `unreported` (its prompt, priced as the provider may bill it: unreported.ts);
 * otherwise nothing was used and the hold is released, keeping in the upstream's capacity the
 * `answered` attempts it answered with an error (requests its account counted). `spent`: what
 * earlier attempts that failed inside their streams billed, settled with it (then never a
 * release).
 */
export function closeFailedOpen(
  hold: Hold,
  f: Failure,
  { sent, answered }: { sent: boolean; answered?: number | undefined },
  unreported: () => Usage,
  spent?: Usage,
): void {
  const why = f.kind === 'aborted' ? f.why : undefined;
  if (spent) {
    hold.settle(sent ? addUsage(spent, unreported()) : spent, settleOutcome(f));
    return;
  }
  if (!sent) {
    hold.release(
      why === 'client_disconnected'
        ? 'client_disconnected'
        : why === 'suspended' || f.kind === 'busy'
          ? 'not_forwarded'
          : 'upstream_error',
      answered,
    );
    return;
  }
  hold.settle(unreported(), settleOutcome(f));
}

/** The settle outcome of a call that ended with this failure (or abort). */
export function settleOutcome(
  f: Failure,
): 'client_disconnected' | 'upstream_error' | 'timeout' | 'budget_exhausted' | 'completed' {
  if (f.kind === 'timeout') return 'timeout';
  if (f.kind !== 'aborted') return 'upstream_error';
  switch (f.why) {
    case 'client_disconnected':
      return 'client_disconnected';
    case 'suspended':
    case 'budget_exhausted':
      return 'budget_exhausted';
    case 'output_limit':
      return 'completed';
  }
}
