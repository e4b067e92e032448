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
import {
  clearedSessionCookie,
  csrfToken,
  hasSession,
  issueSession,
  sameOriginSignIn,
  sessionCookie,
} from './session.js';
import { SignInLimit } from './sign-in-limit.js';
import { endUserLookupId } from '../request/end-user.js';
import { readBudgets } from './view.js';
import { resolveViewer, sessionFor, type Viewer } from './viewer.js';

const BudgetsQuery = z.object({
  tenant: TenantId.optional(),
  /** One end user's windows, as the client called it (hashed the way admission does). */
  end_user: z.string().min(1).max(512).optional(),
});
const SignIn = z.object({
  token: z.string().min(1).max(1_024),
  csrf: z.string().max(64).optional(),
});

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
      sessionSecret: o.sessionSecret,
    });
  const signIns = new SignInLimit(o.signInPerMinute);
  const secure = (request: FastifyRequest) =>
    o.cookieSecure === 'always' || (o.cookieSecure === 'auto' && request.protocol === 'https');
  const budgetsFor = (viewer: Viewer, only?: string, endUser?: string) =>
    readBudgets(app.authority, app.configSnapshot.current, viewer, only, endUser);

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
      const { tenant, end_user: user } = request.query;
      const view = await budgetsFor(
        viewer.value,
        tenant,
        user === undefined ? undefined : endUserLookupId(user),
      );
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
      session: request.headers.authorization === undefined && hasSession(request.headers),
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
      const wait = signIns.take(request.ip);
      if (wait !== undefined) {
        request.audit.code = 'sign_in_rate_limited';
        return signInForm(request, reply, 429, 'Too many sign-in attempts: wait a minute.', {
          'retry-after': String(wait),
        });
      }
      // Login CSRF: only the form this edge served, from this origin, may open a session.
      if (!sameOriginSignIn(request.headers, request.body.csrf)) {
        request.audit.code = 'sign_in_forbidden';
        return signInForm(request, reply, 403, 'Sign in from this page.');
      }
      const subject = sessionFor(request.body.token, app.configSnapshot.current, o.adminToken);
      if (!subject) {
        request.audit.code = 'invalid_api_key';
        return signInForm(request, reply, 401, 'Incorrect API key or admin token provided.');
      }
      return reply
        .code(303)
        .headers({
          location: '/budgets',
          'set-cookie': sessionCookie(issueSession(subject, o.sessionSecret), secure(request)),
          'cache-control': 'no-store',
        })
        .send();
    },
  );

  app.post('/budgets/session/end', (request, reply) =>
    reply
      .code(303)
      .headers({ location: '/budgets', 'set-cookie': clearedSessionCookie(secure(request)) })
      .send(),
  );

  /** The sign-in form, with a fresh anti-CSRF token in it and in its cookie. */
  function signInForm(
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    message: string | undefined,
    headers: Record<string, string> = {},
    extraCookies: string[] = [],
  ): FastifyReply {
    const csrf = csrfToken(secure(request));
    return htmlHeaders(reply)
      .code(status)
      .headers(headers)
      .header('set-cookie', [csrf.cookie, ...extraCookies])
      .send(renderSignIn(message, csrf.token));
  }

  /**
   * The page's answer to a refusal: the sign-in form for missing or wrong credentials (a
   * session cookie that no longer works is cleared), else a short error page.
   */
  function htmlError(request: FastifyRequest, reply: FastifyReply, err: EdgeError): FastifyReply {
    const status = httpError(err.code).status;
    request.audit.code = err.code;
    if (err.code === 'invalid_api_key') {
      const stale = request.headers.authorization === undefined && hasSession(request.headers);
      const message = stale ? 'Your session is no longer valid: sign in again.' : undefined;
      const cleared = stale ? [clearedSessionCookie(secure(request))] : [];
      return signInForm(request, reply, status, message, {}, cleared);
    }
    if (status >= 500) request.log.error({ err, code: err.code }, 'status page failed');
    return htmlHeaders(reply)
      .code(status)
      .headers(err.headers)
      .send(
        `<!doctype html><meta charset="utf-8"><title>Holdfast budgets</title><p>${esc(err.code === 'internal' ? `Internal error (request ${request.id}).` : err.message)}</p>`,
      );
  }
}
