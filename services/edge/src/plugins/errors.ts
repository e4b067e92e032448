import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { printable } from '../request/auth.js';
import { anthropicErrorBody, anthropicStatus, EdgeError, errorBody, httpError } from '../errors.js';
import type { ErrorShape } from '../types.js';

/** The error body shape of the request's route: Anthropic's on /v1/messages, else OpenAI's. */
function errorShapeOf(request: FastifyRequest): ErrorShape {
  return (
    (request.routeOptions.config as { errorShape?: ErrorShape } | undefined)?.errorShape ?? 'openai'
  );
}

/**
 * Answers an edge error: status, headers (Retry-After, ..., and the code in
 * `x-holdfast-error-code`), the error body in the shape of the route's API.
 */
export function sendError(
  request: FastifyRequest,
  reply: FastifyReply,
  err: EdgeError,
): FastifyReply {
  const spec = httpError(err.code);
  // Framework errors can come before the onRequest hook that creates the audit record.
  (request.audit ??= {}).code = err.code;
  if (spec.status >= 500) {
    request.log.error({ err, code: err.code, context: err.context }, 'request failed');
  }
  const anthropic = errorShapeOf(request) === 'anthropic';
  const body = anthropic ? anthropicErrorBody(err, request.id) : errorBody(err, request.id);
  return reply
    .code(anthropic ? anthropicStatus(err.code) : spec.status)
    .headers({ ...err.headers, 'x-holdfast-error-code': err.code })
    .send(body);
}

/** Framework errors (bad JSON, body too large, wrong content type) as edge errors. */
function toEdgeError(err: Error & { statusCode?: number; code?: string }): EdgeError {
  if (err instanceof EdgeError) return err;
  const status = err.statusCode ?? 500;
  if (status === 413) {
    return new EdgeError({ code: 'request_too_large', message: 'The request body is too large.' });
  }
  if (status === 415) {
    return new EdgeError({
      code: 'invalid_request',
      message: 'Send the request body as JSON (Content-Type: application/json).',
    });
  }
  if (status >= 400 && status < 500) {
    return new EdgeError({ code: 'invalid_request', message: `Invalid request: ${err.message}` });
  }
  return new EdgeError({ code: 'internal', message: err.message, cause: err });
}

/** One error handler and one 404 for the whole edge, both answering OpenAI's error body. */
export const errorsPlugin = fp(
  (app: FastifyInstance) => {
    app.setErrorHandler((err: Error & { statusCode?: number }, request, reply) =>
      sendError(request, reply, toEdgeError(err)),
    );
    app.setNotFoundHandler((request, reply) =>
      sendError(
        request,
        reply,
        new EdgeError({
          code: 'not_found',
          message: `Unknown request URL: ${request.method} ${printable(request.url.split('?', 1)[0] ?? '')}.`,
        }),
      ),
    );
  },
  { name: 'holdfast-errors' },
);
