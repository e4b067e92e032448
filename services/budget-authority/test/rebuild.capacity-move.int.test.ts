import { expect } from 'vitest';
import type { TestAuthority } from '../src/testing.js';
import { admissionOf, BASE_CONFIG, miniCall, refusalOf, authorityTest as test } from './harness.js';
import { rebuiltAndRestarted } from './rebuild-activity.js';

/**
 * A call the edge moves to a fallback upstream (`capacity.move`) takes its capacity of the
 * fallback and gives back (or settles) what its admission took of its first upstream. Before
 * `reservation.moved`, no event said so: a rebuild put the take back on the first upstream and
 * left the fallback short of it, so the fallback admitted, for the rest of the minute, calls
 * the provider would refuse (here 1,400 tokens on a fallback whose 1,800 for normal priority
 * held 650 live), and a close of the moved call settled nothing there.
 */

const config = {
  ...BASE_CONFIG,
  upstreams: [
    {
      ...BASE_CONFIG.upstreams[0]!,
      capacity: { tokensPerMinute: 2_000, counting: 'usage' as const },
    },
    {
      id: 'backup',
      baseUrl: 'http://127.0.0.1:8090/v1',
      capacity: { tokensPerMinute: 2_000, counting: 'usage' as const },
    },
  ],
  models: BASE_CONFIG.models.map((m) =>
    m.id === 'gpt-4o-mini' ? { ...m, fallbackUpstreams: ['backup'] } : m,
  ),
  // A share of its own: the team's own windows of each upstream move too.
  tenants: [
    {
      id: 'team',
      capacityShare: 0.9,
      budgets: [{ window: 'day', limit: 100_000 }],
      useCases: [{ id: 'uc', maxTokens: 2_000, models: ['gpt-4o-mini'] }],
    },
  ],
};

const call = (maxTokens = 400) => ({ ...miniCall(100, maxTokens), tenant: 'team', useCase: 'uc' });

async function admitted(h: TestAuthority): Promise<string> {
  const a = admissionOf(await h.client.admit(call()));
  expect(a.upstream).toBe('default');
  return a.reservationId;
}

async function moved(h: TestAuthority, reservationId: string, fromUsedTokens?: number) {
  const to = { reservationId, tenant: 'team', model: 'gpt-4o-mini', from: 'default', to: 'backup' };
  const r = await h.client.moveCapacity({
    ...to,
    tokens: 500,
    ...(fromUsedTokens === undefined ? {} : { fromUsedTokens }),
  });
  expect(r).toEqual({ ok: true, value: { moved: true } });
}

const onBackup = { upstream: 'backup', model: 'gpt-4o-mini' };

test('a call moved to a fallback is rebuilt on the fallback, in flight or closed: the fallback still refuses what live refuses', async ({
  start,
  nc,
  redis,
  iso,
}) => {
  const h = await start(config);
  const inFlight = await admitted(h);
  h.clock.advance(1_000);
  const closed = await admitted(h);
  h.clock.advance(1_000);
  await admitted(h); // stays on default, in flight
  h.clock.advance(2_000);
  // One moved mid-call (nothing read on the first upstream), one after the provider read and
  // billed 120 tokens there (settled to them), then settled on the fallback to its usage.
  await moved(h, inFlight);
  await moved(h, closed, 120);
  h.clock.advance(1_000);
  const settled = await h.client.settle({
    reservationId: closed,
    tenant: 'team',
    usage: { promptTokens: 100, completionTokens: 50 },
    ...onBackup,
  });
  expect(settled.ok && settled.value.status).toBe('settled');
  // backup: 500 in flight + 150 settled, default: 500 in flight + 120 read there; 1,400 more
  // pass normal priority's 1,800 on either.
  const big = () => call(1_300);
  expect(refusalOf(await h.client.admit(big())).code).toBe('upstream_capacity');

  const h2 = await rebuiltAndRestarted(h, config, { start, nc, redis, iso });
  expect(refusalOf(await h2.client.admit(big())).code).toBe('upstream_capacity');
  // The moved call's rebuilt record is the fallback's: its close gives the fallback back its
  // 500, and the call fits there (not on default, where the call that stays is in flight).
  const released = await h2.client.release({
    reservationId: inFlight,
    tenant: 'team',
    reason: 'client_disconnected',
    ...onBackup,
  });
  expect(released.ok && released.value.status).toBe('released');
  expect(admissionOf(await h2.client.admit(big())).upstream).toBe('backup');
});
