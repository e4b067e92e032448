import type { IncomingHttpHeaders } from 'node:http';
import type { CompiledConfig } from '@holdfast/config';
import { TenantId } from '@holdfast/events';
import { Err, Ok, type Result } from '@holdfast/runtime';
import { bearerToken, printable, sha256Hex } from '../request/auth.js';
import { isAdminToken } from '../admin/token.js';
import { EdgeError } from '../errors.js';
import { fingerprint, hasSession, readSession, type SessionSubject } from './session.js';

/**
 * Who is looking at budgets: the admin (every tenant), a tenant (its own tenant and the levels
 * above it), or anyone, when the deployment opened the status page (`EDGE_STATUS_PAGE=open`).
 */
export type Viewer =
  { kind: 'admin' } | { kind: 'tenant'; tenant: string; via: 'key' | 'team' } | { kind: 'public' };

export interface ViewerOptions {
  adminToken: string | undefined;
  access: 'token' | 'open';
  /** Verifies session cookies. */
  sessionSecret: Buffer;
}

/**
 * Resolves the viewer from `Authorization: Bearer`, else the session cookie, else `x-team`
 * (trustHeaders deployments), else the open page. Credentials that are sent but wrong are
 * refused even on an open page, so a typo never silently shows a different scope. A session
 * holds no secret: it is signed, and names the credential it was opened with by fingerprint,
 * so it ends when that credential is rotated or removed.
 */
export function resolveViewer(
  headers: IncomingHttpHeaders,
  cfg: CompiledConfig | undefined,
  opts: ViewerOptions,
): Result<Viewer, EdgeError> {
  const header = headers.authorization;
  if (header === undefined && hasSession(headers)) {
    const viewer = sessionViewer(readSession(headers, opts.sessionSecret), cfg, opts);
    return viewer ?? Err(unauthorized('Your session is no longer valid: sign in again.'));
  }
  const token = header === undefined ? undefined : bearerToken(header);
  if (header !== undefined && token === undefined) {
    return Err(unauthorized('Send Authorization: Bearer <admin token or virtual key>.'));
  }
  if (token !== undefined) {
    if (isAdminToken(token, opts.adminToken)) return Ok({ kind: 'admin' });
    if (!cfg) return Err(noConfig());
    const key = cfg.keysByHash.get(sha256Hex(token));
    if (key) return Ok({ kind: 'tenant', tenant: key.tenant, via: 'key' });
    return Err(unauthorized('Incorrect API key or admin token provided.'));
  }
  const team = headers['x-team'];
  if (typeof team === 'string' && team !== '' && cfg?.raw.auth.trustHeaders) {
    if (TenantId.safeParse(team).success && cfg.tenants.has(team)) {
      return Ok({ kind: 'tenant', tenant: team, via: 'team' });
    }
    return Err(
      new EdgeError({ code: 'unknown_tenant', message: `Unknown team "${printable(team)}".` }),
    );
  }
  if (opts.access === 'open') return Ok({ kind: 'public' });
  return Err(unauthorized('Send Authorization: Bearer <admin token or virtual key>.'));
}

/** The session subject a sign-in with this token opens (undefined: not a valid token). */
export function sessionFor(
  token: string,
  cfg: CompiledConfig | undefined,
  adminToken: string | undefined,
): SessionSubject | undefined {
  if (isAdminToken(token, adminToken)) return { kind: 'admin', fp: fingerprint(token) };
  const hash = sha256Hex(token);
  const key = cfg?.keysByHash.get(hash);
  return key
    ? { kind: 'key', tenant: key.tenant, keyId: key.keyId, fp: fingerprint(hash, true) }
    : undefined;
}

function sessionViewer(
  s: SessionSubject | undefined,
  cfg: CompiledConfig | undefined,
  opts: ViewerOptions,
): Result<Viewer, EdgeError> | undefined {
  if (!s) return undefined;
  if (s.kind === 'admin') {
    const current = opts.adminToken === undefined ? undefined : fingerprint(opts.adminToken);
    return current === s.fp ? Ok({ kind: 'admin' }) : undefined;
  }
  if (!cfg) return Err(noConfig());
  const key = cfg.raw.tenants.find((t) => t.id === s.tenant)?.keys.find((k) => k.id === s.keyId);
  return key && fingerprint(key.sha256, true) === s.fp
    ? Ok({ kind: 'tenant', tenant: s.tenant, via: 'key' })
    : undefined;
}

function unauthorized(message: string): EdgeError {
  return new EdgeError({ code: 'invalid_api_key', message });
}

function noConfig(): EdgeError {
  return new EdgeError({
    code: 'budget_authority_unavailable',
    message: 'The edge has no configuration from the budget authority yet. Retry shortly.',
    headers: { 'retry-after': '1' },
  });
}
