import type { Logger } from '@holdfast/runtime';
import type { FastifyInstance } from 'fastify';
import { bearerToken } from '../request/auth.js';
import { EdgeError } from '../errors.js';
import { sendError } from '../plugins/errors.js';
import { configRoutes, YAML_TYPES } from './config-routes.js';
import { ConfigEditor } from './editor.js';
import { entryRoutes } from './entries.js';
import { keyRoutes } from './keys.js';
import { tenantRoutes } from './tenants.js';
import { isAdminToken } from './token.js';

/**
 * Largest admin request body. The document travels to the authority in one NATS message,
 * and NATS refuses messages over its max_payload (1 MiB by default).
 */
export const ADMIN_BODY_LIMIT_BYTES = 512 * 1024;

/**
 * The admin API, registered under `/admin`. Every route needs `Authorization: Bearer
 * <EDGE_ADMIN_TOKEN>` (never the session cookie, so no other site can make a browser change
 * anything). Without a configured token the whole API answers 404 admin_disabled. One log line
 * per request names the route and outcome, never a body (bodies can carry key hashes).
 */
export function adminRoutes(app: FastifyInstance, opts: { logger: Logger }): void {
  const token = app.edgeOptions.adminToken;
  if (token === undefined) {
    opts.logger.warn('admin API disabled: EDGE_ADMIN_TOKEN is not set (/admin answers 404)');
  } else {
    opts.logger.info('admin API enabled at /admin');
  }

  app.addHook('onRoute', (route) => {
    route.bodyLimit ??= ADMIN_BODY_LIMIT_BYTES;
  });
  app.addHook('onRequest', async (request, reply) => {
    if (token === undefined) {
      return sendError(
        request,
        reply,
        new EdgeError({
          code: 'admin_disabled',
          message: 'The admin API is disabled on this edge: start it with EDGE_ADMIN_TOKEN set.',
        }),
      );
    }
    const header = request.headers.authorization;
    if (header === undefined) {
      return sendError(
        request,
        reply,
        new EdgeError({
          code: 'admin_token_required',
          message: 'Send the admin token: Authorization: Bearer <EDGE_ADMIN_TOKEN>.',
          headers: { 'www-authenticate': 'Bearer realm="holdfast-admin"' },
        }),
      );
    }
    if (!isAdminToken(bearerToken(header), token)) {
      return sendError(
        request,
        reply,
        new EdgeError({ code: 'admin_token_invalid', message: 'That is not the admin token.' }),
      );
    }
    return undefined;
  });
  app.addHook('onResponse', (request, reply, done) => {
    request.log.info(
      {
        method: request.method,
        route: request.routeOptions.url,
        status: reply.statusCode,
        ...(request.audit.code ? { code: request.audit.code } : {}),
      },
      'admin request',
    );
    done();
  });
  app.addContentTypeParser(YAML_TYPES, { parseAs: 'string' }, (_request, body, done) =>
    done(null, body),
  );

  const editor = new ConfigEditor({
    authority: app.authority,
    snapshot: app.configSnapshot,
    logger: opts.logger.child({ component: 'admin' }),
  });
  configRoutes(app, editor);
  tenantRoutes(app, editor);
  entryRoutes(app, editor);
  keyRoutes(app, editor);
}
