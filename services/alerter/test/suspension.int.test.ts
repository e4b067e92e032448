import type { TenantResumed, TenantSuspended } from '@holdfast/events';
import { waitFor, type Isolation } from '@holdfast/testkit';
import type { NatsConnection } from '@nats-io/transport-node';
import { expect } from 'vitest';
import { call } from './authority.js';
import {
  readEvents,
  startWithAuthority,
  stateBucket,
  type Replica,
  cleanupAfterEach,
  alerterTest as test,
} from './harness.js';

const cleanup = cleanupAfterEach();

/** `post` mode bills after the call, so real usage can reach 100% with calls still in flight. */
const CONFIG = {
  upstreams: [{ id: 'default', baseUrl: 'http://127.0.0.1:8089/v1' }],
  models: [
    { id: 'gpt-4o-mini', upstream: 'default', price: { inputPerMTok: 0.15, outputPerMTok: 0.6 } },
  ],
  tenants: [
    {
      id: 'team-s',
      mode: 'post',
      budgets: [{ window: 'minute', limit: 1_000, soft: [0.8], grace: 5_000 }],
      useCases: [{ id: 'UC-1', maxTokens: 1_000, models: ['gpt-4o-mini'] }],
    },
  ],
};

/** The real authority and one alerter replica on the test's names. */
const setup = (ctx: { nc: NatsConnection; natsUrl: string; redisUrl: string; iso: Isolation }) =>
  startWithAuthority(ctx, cleanup, CONFIG);

async function okPolls(replica: Replica): Promise<number> {
  const m = await replica.registry.getSingleMetric('holdfast_alerter_usage_polls_total')!.get();
  return m.values.find((v) => v.labels.result === 'ok')?.value ?? 0;
}

test('at 100% of a hard budget the tenant is suspended: new calls refused, calls in flight settle; resumed when the window frees', async ({
  nc,
  natsUrl,
  redisUrl,
  iso,
}) => {
  const { authority, client } = await setup({ nc, natsUrl, redisUrl, iso });
  const events = () => readEvents(nc, iso.names);

  const [a, b, c] = [call('team-s'), call('team-s'), call('team-s')];
  for (const x of [a, b, c])
    expect(await client.admit(x)).toMatchObject({ ok: true, value: { admitted: true } });
  // A uses the whole minute budget.
  await client.settle({
    reservationId: a.reservationId,
    tenant: 'team-s',
    usage: { promptTokens: 100, completionTokens: 900 },
  });

  const suspended = await waitFor(
    async () => (await events()).find((e): e is TenantSuspended => e.type === 'tenant.suspended'),
    { timeoutMs: 10_000, what: 'tenant.suspended' },
  );
  expect(suspended).toMatchObject({
    tenant: 'team-s',
    by: 'alerter',
    budget: 'minute-tokens',
    graceMs: 5_000,
  });
  expect(await client.admit(call('team-s'))).toMatchObject({
    ok: true,
    value: { admitted: false, code: 'tenant_suspended' },
  });
  // Calls already in flight still settle (or release) within the grace.
  expect(
    await client.settle({
      reservationId: b.reservationId,
      tenant: 'team-s',
      usage: { promptTokens: 100, completionTokens: 50 },
    }),
  ).toMatchObject({ ok: true, value: { status: 'settled', billedTokens: 150 } });
  expect(
    await client.release({
      reservationId: c.reservationId,
      tenant: 'team-s',
      reason: 'client_disconnected',
    }),
  ).toMatchObject({
    ok: true,
    value: { status: 'released' },
  });
  const crossed = (await events()).filter((e) => e.type === 'threshold.crossed');
  expect(crossed).toMatchObject([{ tenant: 'team-s', threshold: 0.8 }]);

  // The usage ages out of the sliding minute: the alerter notices by polling and resumes.
  authority.clock.now += 61_000;
  const resumed = await waitFor(
    async () => (await events()).find((e): e is TenantResumed => e.type === 'tenant.resumed'),
    { timeoutMs: 10_000, what: 'tenant.resumed' },
  );
  expect(resumed).toMatchObject({ tenant: 'team-s', by: 'window_freed' });
  const d = call('team-s');
  expect(await client.admit(d)).toMatchObject({ ok: true, value: { admitted: true } });
  expect((await events()).filter((e) => e.type === 'tenant.suspended')).toHaveLength(1);

  // The resumption re-armed the hard level: filling the window again suspends again.
  await client.settle({
    reservationId: d.reservationId,
    tenant: 'team-s',
    usage: { promptTokens: 500, completionTokens: 500 },
  });
  await waitFor(
    async () => (await events()).filter((e) => e.type === 'tenant.suspended').length === 2,
    {
      timeoutMs: 10_000,
      what: 'a second suspension',
    },
  );
});

test("an admin's suspension is left alone by the alerter even when the window is free; the admin resumes", async ({
  nc,
  natsUrl,
  redisUrl,
  iso,
}) => {
  const { replica, client } = await setup({ nc, natsUrl, redisUrl, iso });

  expect(
    await client.suspend({ tenant: 'team-s', reason: 'incident 42', by: 'admin' }),
  ).toMatchObject({
    ok: true,
    value: { changed: true },
  });
  // The alerter has recorded who suspended, and then polled usage (window empty) a few times.
  const kv = await stateBucket(nc, iso.names);
  await waitFor(async () => (await kv.get('susp.team-s'))?.json<{ by: string }>().by === 'admin', {
    what: 'the suspension recorded as by admin',
  });
  const polls = await okPolls(replica);
  await waitFor(async () => (await okPolls(replica)) >= polls + 3, {
    what: 'three more usage polls',
  });
  expect(await client.admit(call('team-s'))).toMatchObject({
    ok: true,
    value: { admitted: false, code: 'tenant_suspended' },
  });
  expect((await readEvents(nc, iso.names)).filter((e) => e.type === 'tenant.resumed')).toEqual([]);

  expect(await client.resume({ tenant: 'team-s', by: 'admin' })).toMatchObject({
    ok: true,
    value: { changed: true },
  });
  expect(await client.admit(call('team-s'))).toMatchObject({ ok: true, value: { admitted: true } });
});
