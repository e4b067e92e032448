import { Err, errorMessage, Ok, type Result } from '@holdfast/runtime';
import { Agent, request } from 'undici';
import type { SignedRequest } from './sign.js';

/**
 * The receivers' connections, kept alive between attempts. undici's `request` rather than the
 * global `fetch` (the same client under a WHATWG layer: Request and Response objects, web
 * streams, header guards): 0.2-0.5x the CPU of a POST (docs/benchmarks.md), and it sends no
 * browser headers (`accept-language`, `sec-fetch-mode`) that no receiver reads.
 */
const receivers = new Agent();

/** What the delivery log records of an attempt (its status, error and duration fields). */
export interface AttemptFields {
  status: number | null;
  error: string | null;
  durationMs: number;
}

/**
 * Why a job was not delivered: the receiver answered a non-2xx (`status` set), could not be
 * reached, or was never called (its secret is not set). A plain object: it goes into the log.
 */
export interface AttemptError extends AttemptFields {
  code: 'webhook_refused' | 'webhook_unreachable' | 'not_attempted';
}

export type AttemptResult = Result<AttemptFields, AttemptError>;

/**
 * POSTs a signed webhook once, within `timeoutMs`: a 2xx is delivered, any other answer
 * (a redirect is not followed: undici's request follows none) refused, no answer unreachable. `sign` is called inside, so a
 * request that cannot be signed fails the attempt as a network error does.
 */
export async function postWebhook(
  url: string,
  sign: () => SignedRequest,
  timeoutMs: number,
): Promise<AttemptResult> {
  const started = performance.now();
  try {
    const req = sign();
    const res = await request(url, {
      method: 'POST',
      headers: req.headers,
      body: req.body,
      dispatcher: receivers,
      signal: AbortSignal.timeout(timeoutMs),
    });
    // Read to its end (not kept) so the connection is free for the next attempt.
    await res.body.dump();
    const durationMs = performance.now() - started;
    const status = res.statusCode;
    if (status >= 200 && status < 300) return Ok({ status, error: null, durationMs });
    return Err({
      code: 'webhook_refused',
      status,
      error: `HTTP ${status}`,
      durationMs,
    });
  } catch (err) {
    // A system error's code (ECONNREFUSED, ECONNRESET) is said once: in its message, or after.
    const message = errorMessage(err);
    const code = (err as { cause?: { code?: unknown } }).cause?.code;
    return Err({
      code: 'webhook_unreachable',
      status: null,
      error: typeof code === 'string' && !message.includes(code) ? `${message} (${code})` : message,
      durationMs: performance.now() - started,
    });
  }
}
