import { createLogger } from '@holdfast/runtime';
import { expect, vi } from 'vitest';
import { admin, ADMIN_TOKEN, withAdmin } from './admin.js';
import { edgeTest as test, KEYS } from './harness.js';

test('without EDGE_ADMIN_TOKEN the admin API is off: 404 admin_disabled, said at startup', async ({
  stack,
}) => {
  const logger = createLogger({ name: 'edge', level: 'silent' });
  const warn = vi.spyOn(logger, 'warn');
  const s = await stack({ edge: { logger } });
  expect(warn).toHaveBeenCalledWith(expect.stringContaining('admin API disabled'));
  for (const token of [ADMIN_TOKEN, null]) {
    const r = await admin(s, token)('GET', '/admin/config');
    expect(r.status).toBe(404);
    expect(r.body.error).toMatchObject({ code: 'admin_disabled', type: 'invalid_request_error' });
    expect(r.body.error.message).toContain('EDGE_ADMIN_TOKEN');
  }
  expect((await admin(s)('POST', '/admin/tenants', { id: 'x' })).status).toBe(404);
});

test('the admin token is required (401), any other token is refused (403), cookies never count', async ({
  stack,
}) => {
  const s = await stack(withAdmin());
  const before = (await admin(s)('GET', '/admin/config')).body.version;

  const missing = await admin(s, null)('GET', '/admin/tenants');
  expect(missing.status).toBe(401);
  expect(missing.headers['www-authenticate']).toBe('Bearer realm="holdfast-admin"');
  expect(missing.body.error).toMatchObject({ code: 'admin_token_required', param: null });

  for (const wrong of [
    'not-the-admin-token-at-all',
    ADMIN_TOKEN.toUpperCase(),
    `${ADMIN_TOKEN}x`,
    ADMIN_TOKEN.slice(0, -1),
    KEYS.batch,
  ]) {
    const r = await admin(s, wrong)('POST', '/admin/tenants/support-bot/suspend', {});
    expect(r.status).toBe(403);
    expect(r.body.error).toMatchObject({ code: 'admin_token_invalid', type: 'permission_error' });
  }
  const basic = await admin(s, null)('GET', '/admin/config', undefined, {
    authorization: `Basic ${Buffer.from(`admin:${ADMIN_TOKEN}`).toString('base64')}`,
  });
  expect(basic.status).toBe(403);
  // The status page's session cookie carries the token but never opens the admin API.
  const cookie = await admin(s, null)('DELETE', '/admin/tenants/multi', undefined, {
    cookie: `holdfast_token=${ADMIN_TOKEN}`,
  });
  expect(cookie.status).toBe(401);

  // Nothing was changed by any of them; the right token works, case-insensitive scheme.
  const ok = await admin(s, null)('GET', '/admin/config', undefined, {
    authorization: `bearer ${ADMIN_TOKEN}`,
  });
  expect(ok.status).toBe(200);
  expect(ok.body.version).toBe(before);
  expect((await s.usage('support-bot')).suspended).toBe(false);
});

test('no response of the admin API shows a key secret or hash, except the creation', async ({
  stack,
}) => {
  const s = await stack(withAdmin());
  const call = admin(s);
  const created = await call('POST', '/admin/tenants/support-bot/keys', { id: 'support-2' });
  const secret: string = created.body.secret;
  const reads = await Promise.all(
    [
      '/admin/tenants',
      '/admin/tenants/support-bot',
      '/admin/keys',
      '/admin/tenants/support-bot/keys',
    ].map((url) => call('GET', url)),
  );
  for (const r of reads) {
    const text = JSON.stringify(r.body);
    expect(text).not.toContain(secret);
    expect(text).not.toContain('sha256');
  }
  // The declarative document has the hash (that is how keys are stored), never the secret.
  const doc = JSON.stringify((await call('GET', '/admin/config')).body);
  expect(doc).not.toContain(secret);
});
