import type { IncomingHttpHeaders } from 'node:http';

/** The status page's session cookie: the token the viewer signed in with (admin or key). */
const SESSION_COOKIE = 'holdfast_token';

/** The session token from the Cookie header, if any. */
export function sessionToken(headers: IncomingHttpHeaders): string | undefined {
  for (const part of (headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== SESSION_COOKIE) continue;
    try {
      const value = decodeURIComponent(part.slice(eq + 1).trim());
      return value === '' ? undefined : value;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/**
 * Set-Cookie for a session: HttpOnly (no script reads it), SameSite=Strict (no other site
 * sends it), Secure when the page was served over https. It only grants reading the status
 * page and /v1/budgets: the admin API takes the token from the Authorization header only.
 */
export function sessionCookie(token: string, secure: boolean): string {
  const attrs = ['Path=/', 'HttpOnly', 'SameSite=Strict', 'Max-Age=43200'];
  if (secure) attrs.push('Secure');
  return `${SESSION_COOKIE}=${encodeURIComponent(token)}; ${attrs.join('; ')}`;
}

export function clearedSessionCookie(): string {
  return `${SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0`;
}
