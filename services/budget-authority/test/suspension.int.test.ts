import { expect } from 'vitest';
import { waitFor } from '@holdfast/testkit';
import {
  admissionOf,
  BASE_CONFIG,
  newId,
  readEvents,
  refusalOf,
  authorityTest as test,
} from './harness.js';

test('a suspended tenant is refused new calls while calls in flight still settle; resume lets it in', async ({
  iso,
  nc,
  start,
}) => {
  const h = await start(BASE_CONFIG);
  const call = () => ({
    reservationId: newId(),
    tenant: 'support-bot',
    keyId: null,
    useCase: 'UC-101',
    model: 'gpt-4o-mini',
    promptTokens: 50,
    maxTokens: 100,
  });
  const inFlight = call();
  admissionOf(await h.client.admit(inFlight));
  expect(
    await h.client.suspend({
      tenant: 'support-bot',
      reason: 'month window at 100%',
      by: 'alerter',
      budget: 'month-tokens',
      graceMs: 5_000,
    }),
  ).toMatchObject({
    ok: true,
    value: { suspended: true, changed: true },
  });
  expect(
    await h.client.suspend({ tenant: 'support-bot', reason: 'again', by: 'alerter' }),
  ).toMatchObject({ ok: true, value: { changed: false, suspendedBy: ['alerter'] } });
  expect(refusalOf(await h.client.admit(call()))).toMatchObject({
    code: 'tenant_suspended',
    retryAfterSeconds: null,
  });
  // Other tenants are untouched.
  admissionOf(await h.client.admit({ ...call(), tenant: 'batch-summariser', useCase: 'UC-112' }));
  expect(
    await h.client.settle({
      reservationId: inFlight.reservationId,
      tenant: 'support-bot',
      usage: { promptTokens: 50, completionTokens: 20 },
    }),
  ).toMatchObject({
    ok: true,
    value: { status: 'settled', billedTokens: 70 },
  });
  expect(await h.client.resume({ tenant: 'support-bot', by: 'admin' })).toMatchObject({
    ok: true,
    value: { suspended: false, changed: true },
  });
  admissionOf(await h.client.admit(call()));
  const events = await waitFor(async () => {
    const e = await readEvents(nc, iso.names);
    return e.some((x) => x.type === 'tenant.resumed') ? e : undefined;
  });
  expect(events.find((e) => e.type === 'tenant.suspended')).toMatchObject({
    by: 'alerter',
    budget: 'month-tokens',
    graceMs: 5_000,
    reason: 'month window at 100%',
  });
  expect(events.find((e) => e.type === 'tenant.resumed')).toMatchObject({
    by: 'admin',
    tenant: 'support-bot',
  });
});
