import { compileConfig, HoldfastConfigSchema } from '@holdfast/config';
import { describe, expect, test } from 'vitest';
import { sha256Hex } from '../auth.js';
import { isAdminToken } from '../admin/token.js';
import { clearedSessionCookie, sessionCookie, sessionToken } from './session.js';
import { resolveViewer, type ViewerOptions } from './viewer.js';

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

const opts: ViewerOptions = { adminToken: ADMIN, access: 'token' };
const viewer = (headers: Record<string, string>, o = opts, cfg = config()) => {
  const r = resolveViewer(headers, cfg, o);
  return r.ok ? r.value : r.error.code;
};

describe('who sees the budgets', () => {
  test('the admin token, from the header or the session cookie', () => {
    expect(viewer({ authorization: `Bearer ${ADMIN}` })).toEqual({ kind: 'admin' });
    expect(viewer({ cookie: `a=b; holdfast_token=${ADMIN}` })).toEqual({ kind: 'admin' });
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

test('the session cookie: HttpOnly, SameSite=Strict, Secure over https, read back exactly', () => {
  const cookie = sessionCookie('tok;en=1', true);
  expect(cookie).toContain('HttpOnly');
  expect(cookie).toContain('SameSite=Strict');
  expect(cookie).toContain('Secure');
  expect(sessionCookie('t', false)).not.toContain('Secure');
  const value = cookie.split(';')[0]!;
  expect(sessionToken({ cookie: `x=1; ${value}` })).toBe('tok;en=1');
  expect(sessionToken({ cookie: 'holdfast_token=%E0%A4%A' })).toBeUndefined();
  expect(sessionToken({ cookie: 'holdfast_token=' })).toBeUndefined();
  expect(clearedSessionCookie()).toContain('Max-Age=0');
});

test('the admin token comparison: exact match only', () => {
  expect(isAdminToken(ADMIN, ADMIN)).toBe(true);
  for (const other of [ADMIN.slice(1), `${ADMIN} `, ADMIN.toUpperCase(), '', undefined]) {
    expect(isAdminToken(other, ADMIN)).toBe(false);
  }
  expect(isAdminToken(ADMIN, undefined)).toBe(false);
});
