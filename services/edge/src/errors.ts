import { AUDIO_ID, CONTAINER_ID, FILE_ID, SEALED_ID } from '@holdfast/events';
import { BaseError } from '@holdfast/runtime';

/**
 * Every error the edge answers with (docs/api.md). One closed list; `httpError` maps each to
 * its status through an exhaustive switch.
 */
export const EDGE_ERROR_CODES = [
  'invalid_api_key',
  'unknown_tenant',
  'use_case_not_registered',
  'model_not_allowed',
  'tenant_suspended',
  'budget_exceeded',
  'concurrency_limit',
  /** The tenant already tracks budgets for as many end users as it may (maxEndUsers). */
  'end_user_limit',
  'upstream_rate_limited',
  /** The upstream's declared capacity is full for the tenant's priority past its maxQueueMs. */
  'upstream_capacity',
  'budget_authority_unavailable',
  'invalid_request',
  /** Sent as `invalid_request` with status 413. */
  'request_too_large',
  'not_found',
  /**
   * Responses: `previous_response_id` names no response of the caller's tenant (another
   * tenant's, or none): OpenAI's answer for an unknown id, 400 with its code.
   */
  'previous_response_not_found',
  /** The upstream failed (5xx, bad gateway, dropped before answering). */
  'upstream_error',
  /**
   * The upstream was still overloaded (503, Anthropic's 529 `overloaded_error`, or that error
   * inside its stream) after the edge's retries: 503, and on Messages Anthropic's 529.
   */
  'upstream_overloaded',
  /** The upstream did not answer in time. */
  'upstream_timeout',
  /** A bug; details are in the log, never in the response. */
  'internal',
  /** Admin API: no `Authorization: Bearer <admin token>`. */
  'admin_token_required',
  /** Admin API: a token that is not the admin token. */
  'admin_token_invalid',
  /** Admin API: the edge has no EDGE_ADMIN_TOKEN, so the admin API is off. */
  'admin_disabled',
  /** The config document (or the edit) was rejected; the message names every field. */
  'invalid_config',
  /** The config moved past the `expectedVersion` the edit was based on. */
  'version_conflict',
  /** Creating something whose id is taken. */
  'already_exists',
] as const;
export type EdgeErrorCode = (typeof EDGE_ERROR_CODES)[number];

type ErrorType =
  | 'invalid_request_error'
  | 'permission_error'
  | 'rate_limit_error'
  | 'insufficient_quota'
  | 'server_error';

export interface HttpError {
  status: number;
  /** OpenAI's `error.type`. */
  type: ErrorType;
  /** OpenAI's `error.code` as sent on the wire. */
  code: string;
}

export function httpError(code: EdgeErrorCode): HttpError {
  switch (code) {
    case 'invalid_api_key':
    case 'admin_token_required':
      return { status: 401, type: 'invalid_request_error', code };
    case 'admin_token_invalid':
      return { status: 403, type: 'permission_error', code };
    case 'admin_disabled':
      return { status: 404, type: 'invalid_request_error', code };
    case 'invalid_config':
      return { status: 400, type: 'invalid_request_error', code };
    case 'version_conflict':
    case 'already_exists':
      return { status: 409, type: 'invalid_request_error', code };
    case 'unknown_tenant':
    case 'use_case_not_registered':
    case 'model_not_allowed':
    case 'tenant_suspended':
      return { status: 403, type: 'permission_error', code };
    case 'budget_exceeded':
    case 'end_user_limit':
      return { status: 429, type: 'insufficient_quota', code };
    case 'concurrency_limit':
    case 'upstream_rate_limited':
    case 'upstream_capacity':
      return { status: 429, type: 'rate_limit_error', code };
    case 'budget_authority_unavailable':
      return { status: 503, type: 'server_error', code };
    case 'invalid_request':
    case 'previous_response_not_found':
      return { status: 400, type: 'invalid_request_error', code };
    case 'request_too_large':
      return { status: 413, type: 'invalid_request_error', code: 'invalid_request' };
    case 'not_found':
      return { status: 404, type: 'invalid_request_error', code };
    case 'upstream_error':
      return { status: 502, type: 'server_error', code };
    case 'upstream_overloaded':
      return { status: 503, type: 'server_error', code };
    case 'upstream_timeout':
      return { status: 504, type: 'server_error', code };
    case 'internal':
      return { status: 500, type: 'server_error', code };
  }
}

/** An expected failure the edge answers with; `headers` go on the response (Retry-After, ...). */
export class EdgeError extends BaseError<EdgeErrorCode> {
  readonly param: string | null;
  readonly headers: Record<string, string>;

  constructor(opts: {
    code: EdgeErrorCode;
    message: string;
    param?: string | null;
    headers?: Record<string, string>;
    cause?: unknown;
    context?: Record<string, unknown>;
  }) {
    super(opts);
    this.param = opts.param ?? null;
    this.headers = opts.headers ?? {};
  }
}

/**
 * Responses: an input item read by id (`item_reference`, a reasoning item without its content)
 * that names no stored item of the caller's tenant (another tenant's, or none): OpenAI's 400
 * for an unknown item, the same whichever it is; a code execution container likewise (Messages
 * too), a file another team's code execution output made (Messages; Responses: a container
 * file its code interpreter wrote, named by an input part's `file_id`), and an audio reply
 * another team's Chat Completions call made (`namedIn` says so for an id no call could have
 * made, which its prefix cannot tell).
 */
export function itemNotFound(
  id: string,
  namedIn?: 'container' | 'tools' | 'audio' | 'file' | 'chat-file' | 'messages-file',
): EdgeError {
  if (namedIn === 'chat-file') {
    // Chat Completions: a `file` part naming a file another team's code wrote.
    return new EdgeError({
      code: 'invalid_request',
      message: `File with id '${id}' not found.`,
      param: 'messages',
    });
  }
  if (namedIn === 'file' || (namedIn === undefined && id.startsWith('cfile_'))) {
    // Responses: a file another team's code interpreter wrote (an input part's file_id).
    return new EdgeError({
      code: 'invalid_request',
      message: `File with id '${id}' not found.`,
      param: 'input',
    });
  }
  if (namedIn === 'audio' || (namedIn === undefined && AUDIO_ID.test(id))) {
    // Chat Completions: an earlier audio reply an assistant message brings back by id.
    return new EdgeError({
      code: 'invalid_request',
      message: `Audio with id '${id}' not found.`,
      param: 'messages',
    });
  }
  if (namedIn === 'messages-file' || (namedIn === undefined && FILE_ID.test(id))) {
    // Messages: a file another team's code execution output made (named by its file_id).
    const message = `File with id '${id}' not found (named in messages).`;
    return new EdgeError({ code: 'invalid_request', message, param: 'messages' });
  }
  if (namedIn ?? CONTAINER_ID.test(id)) {
    // A code execution container (Messages `container`, a Responses code_interpreter's).
    const param = namedIn ?? (id.startsWith('cntr_') ? 'tools' : 'container');
    const message = `Container with id '${id}' not found (named in ${param}).`;
    return new EdgeError({ code: 'invalid_request', message, param });
  }
  if (SEALED_ID.test(id)) {
    // Responses: sealed reasoning another team's call got (firstOwned).
    const message =
      "An input item's encrypted_content was returned to another team's call: sealed reasoning is sent back only by the team whose call got it. Leave the item out of the input.";
    return new EdgeError({ code: 'invalid_request', message, param: 'input' });
  }
  return new EdgeError({
    code: 'invalid_request',
    message: `Item with id '${id}' not found (read by id in input).`,
    param: 'input',
  });
}

export interface ErrorBody {
  error: { message: string; type: string; code: string; param: string | null };
}

/** OpenAI's error body. 5xx messages are generic; the details stay in the log. */
export function errorBody(err: EdgeError, requestId: string): ErrorBody {
  const spec = httpError(err.code);
  const message = err.code === 'internal' ? `Internal error (request ${requestId}).` : err.message;
  return { error: { message, type: spec.type, code: spec.code, param: err.param } };
}

/** Anthropic's error types, by the status Holdfast answers with. */
function anthropicType(status: number): string {
  switch (status) {
    case 400:
      return 'invalid_request_error';
    case 401:
      return 'authentication_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 529:
      return 'overloaded_error';
    default:
      return status >= 500 ? 'api_error' : 'invalid_request_error';
  }
}

/**
 * The status of an edge error on the Messages surface: as on the OpenAI ones, but an
 * overloaded upstream is Anthropic's own 529 (the SDK retries it as it would Anthropic's).
 */
export function anthropicStatus(code: EdgeErrorCode): number {
  return code === 'upstream_overloaded' ? 529 : httpError(code).status;
}

export interface AnthropicErrorBody {
  type: 'error';
  error: { type: string; message: string };
  request_id: string;
}

/**
 * Anthropic's error body, for the Messages surface: the same status as on the OpenAI surfaces,
 * Anthropic's `error.type` for it, and Holdfast's code readable at the start of the message
 * (it is also in the `x-holdfast-error-code` header).
 */
export function anthropicErrorBody(err: EdgeError, requestId: string): AnthropicErrorBody {
  const openai = errorBody(err, requestId).error;
  const status = anthropicStatus(err.code);
  const message = `${err.code}: ${openai.message}`;
  return { type: 'error', error: { type: anthropicType(status), message }, request_id: requestId };
}
