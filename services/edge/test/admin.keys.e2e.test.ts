import { expect } from 'vitest';
import { admin, withAdmin } from './admin.js';
import { apiError, chat, edgeTest as test, KEYS } from './harness.js';

test('a created key works in the very next call; a deleted key is refused at once', async ({
  stack,
}) => {
  const s = await stack(withAdmin());
  const call = admin(s);
  const created = await call('POST', '/admin/tenants/multi/keys', {
    id: 'multi-2',
    defaultUseCase: 'UC-1',
  });
  expect(created.status).toBe(201);
  const secret: string = created.body.secret;

  const { data, response } = await s
    .openai(secret)
    .chat.completions.create(chat(5, { max_tokens: 4 }))
    .withResponse();
  expect(data.choices[0]?.finish_reason).toBe('length');
  // The key's default use case (UC-1, ceiling 256) applied.
  expect(response.headers.get('x-holdfast-max-tokens')).toBe('4; requested=4; ceiling=256');
  const events = await s.events((e) => e.some((x) => x.type === 'reservation.settled'));
  expect(events.find((e) => e.type === 'reservation.settled')).toMatchObject({
    tenant: 'multi',
    keyId: 'multi-2',
    useCase: 'UC-1',
  });

  expect((await call('DELETE', '/admin/tenants/multi/keys/multi-2')).status).toBe(200);
  const refused = await apiError(s.openai(secret).chat.completions.create(chat(5)));
  expect(refused.status).toBe(401);
  expect(refused.code).toBe('invalid_api_key');
});

test('suspend: the tenant calls get 403 tenant_suspended, others go on; resume lets them in', async ({
  stack,
}) => {
  const s = await stack(withAdmin());
  const call = admin(s);
  const suspended = await call('POST', '/admin/tenants/support-bot/suspend', {
    reason: 'invoice review',
  });
  expect(suspended.status).toBe(200);
  expect(suspended.body.data).toEqual({
    tenant: 'support-bot',
    suspended: true,
    changed: true,
    suspendedBy: ['admin'],
  });
  // Suspending twice changes nothing.
  expect((await call('POST', '/admin/tenants/support-bot/suspend')).body.data.changed).toBe(false);

  const err = await apiError(s.openai(KEYS.support).chat.completions.create(chat(5)));
  expect(err.status).toBe(403);
  expect(err.code).toBe('tenant_suspended');
  expect(s.upstream.stats().recent).toHaveLength(0);
  const other = await s.openai(KEYS.batch).chat.completions.create(chat(5, { max_tokens: 3 }));
  expect(other.choices).toHaveLength(1);

  const resumed = await call('POST', '/admin/tenants/support-bot/resume');
  expect(resumed.body.data).toEqual({
    tenant: 'support-bot',
    suspended: false,
    changed: true,
    suspendedBy: [],
  });
  const served = await s.openai(KEYS.support).chat.completions.create(chat(5, { max_tokens: 3 }));
  expect(served.choices).toHaveLength(1);

  const events = await s.events((e) => e.some((x) => x.type === 'tenant.resumed'));
  expect(events.find((e) => e.type === 'tenant.suspended')).toMatchObject({
    tenant: 'support-bot',
    by: 'admin',
    reason: 'invoice review',
  });
  expect(events.find((e) => e.type === 'tenant.resumed')).toMatchObject({
    tenant: 'support-bot',
    by: 'admin',
  });
});

test('a suspension reason in astral characters (🧾: two UTF-16 units each) is measured in characters by the edge and the authority alike: 500 is recorded as sent, 501 is one 400 that suspends nothing', async ({
  stack,
}) => {
  // zod (the admin body, the authority's SuspendRequest, the event) and ajv (the event's fast
  // check) both count code points: 500 of them (1,000 UTF-16 units) pass every one.
  const s = await stack(withAdmin());
  const call = admin(s);
  const past = await call('POST', '/admin/tenants/support-bot/suspend', {
    reason: '🧾'.repeat(501),
  });
  expect(past.status).toBe(400);
  expect(past.body).toMatchObject({ error: { code: 'invalid_request' } });
  expect(JSON.stringify(past.body)).toContain('reason');
  const reason = '🧾'.repeat(500);
  const at = await call('POST', '/admin/tenants/support-bot/suspend', { reason });
  expect(at.status).toBe(200);
  expect(at.body.data).toMatchObject({ suspended: true, changed: true });
  const events = await s.events((e) => e.some((x) => x.type === 'tenant.suspended'));
  const suspended = events.filter((e) => e.type === 'tenant.suspended');
  expect(suspended).toEqual([expect.objectContaining({ tenant: 'support-bot', reason })]);
});
