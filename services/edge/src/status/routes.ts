import { randomBytes } from 'node:crypto';
import { TenantId } from '@holdfast/events';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { EdgeError } from '../errors.js';
import { httpError } from '../errors.js';
import { sendError } from '../plugins/errors.js';
import { esc } from './html.js';
import { renderBars } from './bars.js';
import { renderPage, renderSignIn } from './page.js';
import { clearedSessionCookie, sessionCookie, sessionToken } from './session.js';
import { readBudgets } from './view.js';
import { resolveViewer, type Viewer } from './viewer.js';

const BudgetsQuery = z.object({ tenant: TenantId.optional() });
const SignIn = z.object({ token: z.string().min(1).max(1_024) });

function htmlHeaders(reply: FastifyReply, nonce?: string): FastifyReply {
  const script = nonce === undefined ? "'none'" : `'nonce-${nonce}'`;
  return reply.type('text/html; charset=utf-8').headers({
    'cache-control': 'no-store',
    'content-security-policy': `default-src 'none'; style-src 'unsafe-inline'; script-src ${script}; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
  });
}

/**
 * The budgets as people and scripts see them: `GET /budgets` (HTML status page, sign-in form,
 * live bars at `/budgets/bars`) and `GET /v1/budgets` (JSON). Who sees what: `viewer.ts`.
 */
export function statusRoutes(app: FastifyInstance): void {
  const o = app.edgeOptions;
  const viewerOf = (request: FastifyRequest) =>
    resolveViewer(request.headers, app.configSnapshot.current, {
      adminToken: o.adminToken,
      access: o.statusAccess,
    });
  const budgetsFor = (viewer: Viewer, only?: string) =>
    readBudgets(app.authority, app.configSnapshot.current, viewer, only);

  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: 8_192 },
    (_request, body, done) => done(null, Object.fromEntries(new URLSearchParams(body as string))),
  );

  app.get<{ Querystring: z.infer<typeof BudgetsQuery> }>(
    '/v1/budgets',
    { schema: { querystring: BudgetsQuery } },
    async (request, reply) => {
      const viewer = viewerOf(request);
      if (!viewer.ok) return sendError(request, reply, viewer.error);
      if (viewer.value.kind === 'tenant') request.audit.tenant = viewer.value.tenant;
      const view = await budgetsFor(viewer.value, request.query.tenant);
      if (!view.ok) return sendError(request, reply, view.error);
      return reply.header('cache-control', 'no-store').send(view.value);
    },
  );

  app.get('/budgets', async (request, reply) => {
    const viewer = viewerOf(request);
    if (!viewer.ok) return htmlError(request, reply, viewer.error);
    const view = await budgetsFor(viewer.value);
    if (!view.ok) return htmlError(request, reply, view.error);
    const nonce = randomBytes(16).toString('base64');
    const page = renderPage(view.value, {
      viewer: viewer.value,
      session:
        request.headers.authorization === undefined && sessionToken(request.headers) !== undefined,
      refreshMs: o.statusRefreshMs,
      nonce,
    });
    return htmlHeaders(reply, nonce).send(page);
  });

  app.get('/budgets/bars', async (request, reply) => {
    const viewer = viewerOf(request);
    if (!viewer.ok) return sendError(request, reply, viewer.error);
    const view = await budgetsFor(viewer.value);
    if (!view.ok) return sendError(request, reply, view.error);
    return htmlHeaders(reply)
      .header('x-holdfast-ledger-time', view.value.time)
      .send(renderBars(view.value));
  });

  app.post<{ Body: z.infer<typeof SignIn> }>(
    '/budgets/session',
    { schema: { body: SignIn } },
    (request, reply) => {
      const { token } = request.body;
      const viewer = resolveViewer(
        { authorization: `Bearer ${token}` },
        app.configSnapshot.current,
        {
          adminToken: o.adminToken,
          access: 'token',
        },
      );
      if (!viewer.ok) {
        const status = httpError(viewer.error.code).status;
        return htmlHeaders(reply).code(status).send(renderSignIn(viewer.error.message));
      }
      return reply
        .code(303)
        .headers({
          location: '/budgets',
          'set-cookie': sessionCookie(token, request.protocol === 'https'),
          'cache-control': 'no-store',
        })
        .send();
    },
  );

  app.post('/budgets/session/end', (_request, reply) =>
    reply.code(303).headers({ location: '/budgets', 'set-cookie': clearedSessionCookie() }).send(),
  );
}

/**
 * The page's answer to a refusal: the sign-in form for missing or wrong credentials (a
 * session cookie that no longer works is cleared), else a short error page.
 */
function htmlError(request: FastifyRequest, reply: FastifyReply, err: EdgeError): FastifyReply {
  const status = httpError(err.code).status;
  request.audit.code = err.code;
  if (err.code === 'invalid_api_key') {
    const stale = request.headers.authorization === undefined && sessionToken(request.headers);
    if (stale) reply.header('set-cookie', clearedSessionCookie());
    const message = stale ? 'Your session is no longer valid: sign in again.' : undefined;
    return htmlHeaders(reply).code(status).send(renderSignIn(message));
  }
  if (status >= 500) request.log.error({ err, code: err.code }, 'status page failed');
  return htmlHeaders(reply)
    .code(status)
    .headers(err.headers)
    .send(
      `<!doctype html><meta charset="utf-8"><title>Holdfast budgets</title><p>${esc(err.code === 'internal' ? `Internal error (request ${request.id}).` : err.message)}</p>`,
    );
}
