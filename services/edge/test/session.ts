import type { Stack } from './harness.js';

/** The sign-in form's anti-CSRF token and cookie, as a browser gets them with the form. */
export async function signInForm(s: Stack): Promise<{ csrf: string; cookie: string }> {
  const page = await s.edge.app.inject({ method: 'GET', url: '/budgets' });
  const csrf = /name="csrf" value="([^"]+)"/.exec(page.body)?.[1] ?? '';
  const cookie = [page.headers['set-cookie']]
    .flat()
    .map(String)
    .find((c) => c.startsWith('holdfast_csrf='));
  return { csrf, cookie: cookie?.split(';')[0] ?? '' };
}

/** Posts the status page's sign-in form as a browser would (the form's token, its cookie). */
export async function signIn(
  s: Stack,
  token: string,
  opts: {
    csrf?: string;
    cookie?: string;
    headers?: Record<string, string>;
    remoteAddress?: string;
  } = {},
) {
  const f = await signInForm(s);
  return s.edge.app.inject({
    method: 'POST',
    url: '/budgets/session',
    remoteAddress: opts.remoteAddress,
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      cookie: opts.cookie ?? f.cookie,
      ...opts.headers,
    },
    payload: new URLSearchParams({ token, csrf: opts.csrf ?? f.csrf }).toString(),
  });
}

/** The `name=value` of the session cookie a sign-in set. */
export function sessionCookieOf(r: { headers: Record<string, unknown> }): string {
  const all = [r.headers['set-cookie']].flat().map(String);
  return all.find((c) => c.startsWith('holdfast_session='))?.split(';')[0] ?? '';
}
