import { CONFIG_LIMITS } from '@holdfast/config';
import { expect } from 'vitest';
import { admin, withAdmin } from './admin.js';
import { edgeTest as test } from './harness.js';

type Doc = { tenants: { id: string; keys: { id: string; sha256: string }[] }[] };

test('admin API: a tenant at its key limit takes no more; the refusal is a 400 invalid_config naming the limit, and nothing changes', async ({
  stack,
}) => {
  const s = await stack(withAdmin());
  const call = admin(s);
  // Fill tenant multi up to the limit through the whole document (one apply).
  const doc = (await call('GET', '/admin/config')).body.config as Doc;
  const multi = doc.tenants.find((t) => t.id === 'multi')!;
  const have = multi.keys.length;
  for (let i = have; i < CONFIG_LIMITS.keysPerTenant; i++) {
    multi.keys.push({ id: `bulk-${i}`, sha256: `c${i.toString(16).padStart(63, '0')}` });
  }
  const filled = await call('PUT', '/admin/config', doc);
  expect(filled.status).toBe(200);
  const version: number = filled.body.version;
  const listed = await call('GET', '/admin/tenants/multi/keys');
  expect(listed.body.data).toHaveLength(1_000);

  // One more, the way a script adding keys in a loop would: refused, with the limit named.
  const more = await call('POST', '/admin/tenants/multi/keys', { id: 'one-too-many' });
  expect(more.status).toBe(400);
  expect(more.body.error.code).toBe('invalid_config');
  expect(more.body.error.message).toContain(
    'tenants[id=multi].keys: at most 1,000 keys per tenant',
  );
  // The same through the whole document.
  multi.keys.push({ id: 'one-too-many', sha256: 'f'.repeat(64) });
  const put = await call('PUT', '/admin/config', doc);
  expect(put.status).toBe(400);
  expect(put.body.error.code).toBe('invalid_config');

  // Nothing changed: same version, same 1,000 keys, the refused key unknown.
  const after = await call('GET', '/admin/config');
  expect(after.body.version).toBe(version);
  const keys = (after.body.config as Doc).tenants.find((t) => t.id === 'multi')!.keys;
  expect(keys).toHaveLength(1_000);
  expect(keys.some((k) => k.id === 'one-too-many')).toBe(false);
});
