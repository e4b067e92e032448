import { expect, test } from 'vitest';
import { loadConfig } from './env.js';

test('the admin API and the status page are off / token-only unless configured', () => {
  const { options } = loadConfig({});
  expect(options).toMatchObject({
    adminToken: undefined,
    statusAccess: 'token',
    statusRefreshMs: 2_000,
  });
  const on = loadConfig({
    EDGE_ADMIN_TOKEN: 'a-long-enough-admin-token',
    EDGE_STATUS_PAGE: 'open',
    EDGE_STATUS_REFRESH_MS: '500',
  }).options;
  expect(on).toMatchObject({
    adminToken: 'a-long-enough-admin-token',
    statusAccess: 'open',
    statusRefreshMs: 500,
  });
});

test('a weak or malformed admin token stops the edge at startup, naming the variable', () => {
  for (const token of ['short', 'has spaces in the admin token', 'tab\tin-the-admin-token']) {
    expect(() => loadConfig({ EDGE_ADMIN_TOKEN: token })).toThrow(/EDGE_ADMIN_TOKEN/);
  }
  expect(() => loadConfig({ EDGE_STATUS_PAGE: 'public' })).toThrow(/EDGE_STATUS_PAGE/);
});

test('the bounds on open request bodies take at least one body at the body limit', () => {
  expect(loadConfig({}).options.openBodies).toEqual({
    tenantBodyBytes: 128 * 1024 * 1024,
    bodyBytes: 512 * 1024 * 1024,
  });
  expect(() =>
    loadConfig({ EDGE_BODY_LIMIT_BYTES: '2000000', EDGE_TENANT_OPEN_BODY_BYTES: '1000000' }),
  ).toThrow(/EDGE_TENANT_OPEN_BODY_BYTES/);
  expect(() => loadConfig({ EDGE_OPEN_BODY_BYTES: '1048576' })).toThrow(/EDGE_OPEN_BODY_BYTES/);
});
