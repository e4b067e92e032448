import { compileConfig, HoldfastConfigSchema } from '@holdfast/config';
import { describe, expect, test } from 'vitest';
import { sha256Hex } from '../request/auth.js';
import { isAdminToken } from '../admin/token.js';
import { randomBytes } from 'node:crypto';
import {
  clearedSessionCookie,
  csrfToken,
  issueSession,
  readSession,
  sameOriginSignIn,
  sessionCookie,
} from './session.js';
import { SignInLimit } from './sign-in-limit.js';
import { resolveViewer, sessionFor, type ViewerOptions } from './viewer.js';

const ADMIN = 'admin-token-0123456789';
const KEY = 'sk-hf-team-key';

function config(trustHeaders = false) {
  return compileConfig(
    HoldfastConfigSchema.parse({
      auth: { trustHeaders },
      tenants: [{ id: 'team', keys: [{ id: 'k1', sha256: sha256Hex(KEY) }] }, { id: 'other' }],
    }),
  );
}

const SECRET = randomBytes(32);
const opts: ViewerOptions = { adminToken: ADMIN, access: 'token', sessionSecret: SECRET };
/** The Cookie header of a session opened with this token. */
const sessionOf = (token: string, cfg = config()) =>
  `a=b; ${sessionCookie(issueSession(sessionFor(token, cfg, ADMIN)!, SECRET), false).split(';')[0]}`;
const viewer = (headers: Record<string, string>, o = opts, cfg = config()) => {
  const r = resolveViewer(headers, cfg, o);
  return r.ok ? r.value : r.error.code;
};

describe('who sees the budgets', () => {
  test('the admin token, from the header or the session cookie', () => {
    expect(viewer({ authorization: `Bearer ${ADMIN}` })).toEqual({ kind: 'admin' });
    expect(viewer({ cookie: sessionOf(ADMIN) })).toEqual({ kind: 'admin' });
  });
  test('a virtual key: its own tenant', () => {
    expect(viewer({ authorization: `Bearer ${KEY}` })).toEqual({
      kind: 'tenant',
      tenant: 'team',
      via: 'key',
    });
  });
  test('no or wrong credentials: refused, even on an open page when they are wrong', () => {
    expect(viewer({})).toBe('invalid_api_key');
    expect(viewer({ authorization: 'Bearer nope' })).toBe('invalid_api_key');
    expect(viewer({ authorization: 'Basic abc' })).toBe('invalid_api_key');
    expect(viewer({ authorization: 'Bearer nope' }, { ...opts, access: 'open' })).toBe(
      'invalid_api_key',
    );
    expect(viewer({}, { ...opts, access: 'open' })).toEqual({ kind: 'public' });
  });
  test('the admin token is not accepted when none is configured', () => {
    expect(viewer({ authorization: `Bearer ${ADMIN}` }, { ...opts, adminToken: undefined })).toBe(
      'invalid_api_key',
    );
  });
  test('x-team counts only in trustHeaders deployments', () => {
    expect(viewer({ 'x-team': 'team' })).toBe('invalid_api_key');
    expect(viewer({ 'x-team': 'team' }, opts, config(true))).toMatchObject({
      kind: 'tenant',
      tenant: 'team',
      via: 'team',
    });
    expect(viewer({ 'x-team': 'ghost' }, opts, config(true))).toBe('unknown_tenant');
  });
  test('a key before the first config: unavailable, not unknown', () => {
    const r = resolveViewer({ authorization: `Bearer ${KEY}` }, undefined, opts);
    expect(r.ok ? r.value : r.error.code).toBe('budget_authority_unavailable');
  });
});

describe('status page sessions', () => {
  test('the cookie holds no token or key: a signed statement, HttpOnly, SameSite=Strict, Secure over https', () => {
    const cookie = sessionCookie(issueSession(sessionFor(KEY, config(), ADMIN)!, SECRET), true);
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Strict');
    expect(cookie).toContain('Secure');
    expect(cookie).not.toContain(KEY);
    expect(cookie).not.toContain(sha256Hex(KEY));
    expect(decodeURIComponent(cookie)).not.toContain(ADMIN);
    expect(sessionCookie('x', false)).not.toContain('Secure');
    expect(clearedSessionCookie(false)).toContain('Max-Age=0');
    expect(viewer({ cookie: cookie.split(';')[0]! })).toEqual({
      kind: 'tenant',
      tenant: 'team',
      via: 'key',
    });
  });

  test('a forged, tampered, expired or foreign-secret session is refused', () => {
    const value = issueSession({ kind: 'admin', fp: 'whatever' }, SECRET);
    const [v, payload, mac] = value.split('.');
    const forged = Buffer.from(JSON.stringify({ kind: 'admin', fp: 'x', exp: 9e9 })).toString(
      'base64url',
    );
    for (const bad of [
      `${v}.${forged}.${mac}`,
      `${v}.${payload}.${mac!.slice(1)}x`,
      issueSession({ kind: 'admin', fp: 'x' }, randomBytes(32)),
      'v0.a.b',
      '',
    ]) {
      expect(readSession({ cookie: `holdfast_session=${bad}` }, SECRET)).toBeUndefined();
    }
    const old = issueSession({ kind: 'admin', fp: 'x' }, SECRET, Date.now() - 13 * 3_600_000);
    expect(readSession({ cookie: `holdfast_session=${old}` }, SECRET)).toBeUndefined();
  });

  test('rotating the admin token or a key ends the sessions opened with it', () => {
    const admin = sessionOf(ADMIN);
    expect(viewer({ cookie: admin }, { ...opts, adminToken: `${ADMIN}-rotated` })).toBe(
      'invalid_api_key',
    );
    const key = sessionOf(KEY);
    const rotated = compileConfig(
      HoldfastConfigSchema.parse({
        tenants: [{ id: 'team', keys: [{ id: 'k1', sha256: sha256Hex('sk-new') }] }],
      }),
    );
    expect(viewer({ cookie: key }, opts, rotated)).toBe('invalid_api_key');
  });

  test('login CSRF: only the form this edge served, from its own origin', () => {
    const { token, cookie } = csrfToken(false);
    const pair = cookie.split(';')[0]!;
    const host = 'edge.example:8080';
    expect(sameOriginSignIn({ cookie: pair, host }, token)).toBe(true);
    expect(sameOriginSignIn({ cookie: pair, host, origin: `http://${host}` }, token)).toBe(true);
    expect(sameOriginSignIn({ cookie: pair, host }, `${token}x`)).toBe(false);
    expect(sameOriginSignIn({ host }, token)).toBe(false);
    expect(sameOriginSignIn({ cookie: pair, host, origin: 'https://evil.example' }, token)).toBe(
      false,
    );
    expect(sameOriginSignIn({ cookie: pair, host, 'sec-fetch-site': 'cross-site' }, token)).toBe(
      false,
    );
  });

  test('sign-in attempts per client and minute', () => {
    const limit = new SignInLimit(3);
    const t = 1_000_000_040_000; // 20 s into a minute
    expect([1, 2, 3].map(() => limit.take('1.2.3.4', t))).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
    expect(limit.take('1.2.3.4', t)).toBe(40);
    expect(limit.take('5.6.7.8', t)).toBeUndefined();
    expect(limit.take('1.2.3.4', t + 40_000)).toBeUndefined();
  });
});

test('the admin token comparison: exact match only', () => {
  expect(isAdminToken(ADMIN, ADMIN)).toBe(true);
  for (const other of [ADMIN.slice(1), `${ADMIN} `, ADMIN.toUpperCase(), '', undefined]) {
    expect(isAdminToken(other, ADMIN)).toBe(false);
  }
  expect(isAdminToken(ADMIN, undefined)).toBe(false);
});
