import { expect, test } from 'vitest';
import {
  anthropicErrorBody,
  anthropicStatus,
  EDGE_ERROR_CODES,
  EdgeError,
  errorBody,
  httpError,
} from './errors.js';

test('every edge error code has the status of the docs/api.md table', () => {
  const statuses = Object.fromEntries(EDGE_ERROR_CODES.map((c) => [c, httpError(c).status]));
  expect(statuses).toEqual({
    invalid_api_key: 401,
    unknown_tenant: 403,
    use_case_not_registered: 403,
    model_not_allowed: 403,
    tenant_suspended: 403,
    budget_exceeded: 429,
    concurrency_limit: 429,
    end_user_limit: 429,
    upstream_rate_limited: 429,
    upstream_capacity: 429,
    budget_authority_unavailable: 503,
    invalid_request: 400,
    request_too_large: 413,
    not_found: 404,
    previous_response_not_found: 400,
    upstream_error: 502,
    upstream_overloaded: 503,
    upstream_timeout: 504,
    internal: 500,
    admin_token_required: 401,
    admin_token_invalid: 403,
    admin_disabled: 404,
    invalid_config: 400,
    version_conflict: 409,
    already_exists: 409,
  });
  expect(httpError('request_too_large').code).toBe('invalid_request');
});

test('the body is OpenAI-shaped and hides the details of a bug', () => {
  const err = new EdgeError({ code: 'internal', message: 'redis exploded at 10.0.0.3' });
  expect(errorBody(err, 'req-1')).toEqual({
    error: {
      message: 'Internal error (request req-1).',
      type: 'server_error',
      code: 'internal',
      param: null,
    },
  });
});

test("Anthropic's shape keeps the status, names the type, and carries our code in the message", () => {
  const err = new EdgeError({ code: 'budget_exceeded', message: 'No room: 210 left.' });
  expect(anthropicErrorBody(err, 'req-2')).toEqual({
    type: 'error',
    error: { type: 'rate_limit_error', message: 'budget_exceeded: No room: 210 left.' },
    request_id: 'req-2',
  });
  const types = Object.fromEntries(
    EDGE_ERROR_CODES.map((c) => [
      c,
      anthropicErrorBody(new EdgeError({ code: c, message: 'x' }), 'r').error.type,
    ]),
  );
  expect(types).toMatchObject({
    invalid_api_key: 'authentication_error',
    model_not_allowed: 'permission_error',
    invalid_request: 'invalid_request_error',
    request_too_large: 'request_too_large',
    not_found: 'not_found_error',
    upstream_rate_limited: 'rate_limit_error',
    upstream_error: 'api_error',
    upstream_overloaded: 'overloaded_error',
    budget_authority_unavailable: 'api_error',
  });
  // An overloaded upstream is Anthropic's own 529 on Messages; every other status is the same.
  expect(anthropicStatus('upstream_overloaded')).toBe(529);
  const others = EDGE_ERROR_CODES.filter((c) => c !== 'upstream_overloaded');
  expect(others.every((c) => anthropicStatus(c) === httpError(c).status)).toBe(true);
  expect(
    anthropicErrorBody(new EdgeError({ code: 'internal', message: 'secret' }), 'r').error.message,
  ).toBe('internal: Internal error (request r).');
});
