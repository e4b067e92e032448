import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

/** The status page's session cookie: a signed statement of who signed in, never a secret. */
const SESSION_COOKIE = 'holdfast_session';
/** The sign-in form's anti-CSRF token (double submit: this cookie and a form field). */
const CSRF_COOKIE = 'holdfast_csrf';
const SESSION_SECONDS = 43_200;

/** Who a session is for: the admin, or one virtual key of a tenant. */
export type SessionSubject =
  { kind: 'admin'; fp: string } | { kind: 'key'; tenant: string; keyId: string; fp: string };

/**
 * A fingerprint of a credential: 16 hex digits of its sha256. A session names the credential
 * it was opened with by fingerprint, so rotating the admin token or a key ends its sessions,
 * and the cookie holds nothing that authenticates an API call.
 */
export function fingerprint(secretOrHash: string, isHash = false): string {
  const hash = isHash ? secretOrHash : createHash('sha256').update(secretOrHash).digest('hex');
  return hash.slice(0, 16);
}

function cookieValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  for (const part of (headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
    try {
      const value = decodeURIComponent(part.slice(eq + 1).trim());
      return value === '' ? undefined : value;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

function sign(secret: Buffer, payload: string): string {
  return createHmac('sha256', secret).update(payload).digest('base64url');
}

/** The cookie value of a new session: `v1.<payload>.<HMAC-SHA256 of it>`, base64url. */
export function issueSession(subject: SessionSubject, secret: Buffer, nowMs = Date.now()): string {
  const exp = Math.floor(nowMs / 1_000) + SESSION_SECONDS;
  const payload = Buffer.from(JSON.stringify({ ...subject, exp })).toString('base64url');
  return `v1.${payload}.${sign(secret, payload)}`;
}

/** The session a request carries, when its signature holds and it has not expired. */
export function readSession(
  headers: IncomingHttpHeaders,
  secret: Buffer,
  nowMs = Date.now(),
): SessionSubject | undefined {
  const value = cookieValue(headers, SESSION_COOKIE);
  const [version, payload, mac] = value?.split('.') ?? [];
  if (version !== 'v1' || !payload || !mac) return undefined;
  const expected = Buffer.from(sign(secret, payload));
  const given = Buffer.from(mac);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) return undefined;
  try {
    const s = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<
      string,
      unknown
    >;
    if (typeof s.exp !== 'number' || s.exp * 1_000 <= nowMs || typeof s.fp !== 'string') {
      return undefined;
    }
    if (s.kind === 'admin') return { kind: 'admin', fp: s.fp };
    if (s.kind === 'key' && typeof s.tenant === 'string' && typeof s.keyId === 'string') {
      return { kind: 'key', tenant: s.tenant, keyId: s.keyId, fp: s.fp };
    }
    return undefined;
  } catch {
    return undefined;
  }
}

/** Whether the request carries a session cookie at all (valid or not). */
export function hasSession(headers: IncomingHttpHeaders): boolean {
  return cookieValue(headers, SESSION_COOKIE) !== undefined;
}

function attributes(secure: boolean, maxAge: number): string {
  const attrs = ['Path=/', 'HttpOnly', 'SameSite=Strict', `Max-Age=${maxAge}`];
  if (secure) attrs.push('Secure');
  return attrs.join('; ');
}

/**
 * Set-Cookie for a session: HttpOnly (no script reads it), SameSite=Strict (no other site
 * sends it), Secure when the page was served over https (or the deployment says always). It
 * only grants reading the status page and /v1/budgets: the admin API takes the token from the
 * Authorization header only.
 */
export function sessionCookie(value: string, secure: boolean): string {
  return `${SESSION_COOKIE}=${encodeURIComponent(value)}; ${attributes(secure, SESSION_SECONDS)}`;
}

export function clearedSessionCookie(secure: boolean): string {
  return `${SESSION_COOKIE}=; ${attributes(secure, 0)}`;
}

/** A fresh anti-CSRF token for the sign-in form, and its cookie. */
export function csrfToken(secure: boolean): { token: string; cookie: string } {
  const token = randomBytes(18).toString('base64url');
  return { token, cookie: `${CSRF_COOKIE}=${token}; ${attributes(secure, 3_600)}` };
}

/**
 * Whether a sign-in is the form this edge served (login CSRF): the form's token equals its
 * cookie (which another site cannot read or, SameSite=Strict, make the browser send), and the
 * browser's own provenance headers, when present, say same origin.
 */
export function sameOriginSignIn(headers: IncomingHttpHeaders, formToken: unknown): boolean {
  const cookie = cookieValue(headers, CSRF_COOKIE);
  if (typeof formToken !== 'string' || !cookie) return false;
  const a = Buffer.from(formToken);
  const b = Buffer.from(cookie);
  if (a.length !== b.length || !timingSafeEqual(a, b)) return false;
  const site = headers['sec-fetch-site'];
  if (typeof site === 'string' && site !== 'same-origin' && site !== 'none') return false;
  const origin = headers.origin;
  if (typeof origin === 'string' && origin !== 'null') {
    try {
      if (new URL(origin).host !== headers.host) return false;
    } catch {
      return false;
    }
  }
  return true;
}
