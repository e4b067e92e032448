import { expect } from 'vitest';
import { admittedOnDefault, capacityTokens } from './capacity-moves.js';
import { BASE_CONFIG, authorityTest as test } from './harness.js';

/**
 * An admitted call going on to a fallback (`capacity.move`): its capacity is taken of the
 * fallback as its admission took it of its first upstream, then given back there; a fallback
 * without room for it takes nothing and changes nothing.
 */

const config = (backupTpm: number) => ({
  ...BASE_CONFIG,
  upstreams: [
    { ...BASE_CONFIG.upstreams[0]!, capacity: { tokensPerMinute: 100_000 } },
    {
      id: 'backup',
      baseUrl: 'http://127.0.0.1:8090/v1',
      capacity: { tokensPerMinute: backupTpm },
    },
    { id: 'spare', baseUrl: 'http://127.0.0.1:8091/v1' },
  ],
  models: BASE_CONFIG.models.map((m) =>
    m.id === 'gpt-4o-mini' ? { ...m, fallbackUpstreams: ['backup', 'spare'] } : m,
  ),
});

const move = (reservationId: string, to: string, from?: string) => ({
  reservationId,
  tenant: 'support-bot',
  model: 'gpt-4o-mini',
  ...(from ? { from } : {}),
  to,
  tokens: 500,
});

test('a call moved to a fallback takes its capacity there and gives back its first upstream', async ({
  start,
}) => {
  const h = await start(config(10_000));
  const id = await admittedOnDefault(h);
  expect(await capacityTokens(h)).toEqual({ default: 500, backup: 0 });
  expect(await h.client.moveCapacity(move(id, 'backup', 'default'))).toEqual({
    ok: true,
    value: { moved: true },
  });
  expect(await capacityTokens(h)).toEqual({ default: 0, backup: 500 });
  // Its close settles the fallback's (counting `requested`: what was taken stays the minute's).
  const settled = await h.client.release({
    reservationId: id,
    tenant: 'support-bot',
    upstream: 'backup',
    model: 'gpt-4o-mini',
    reason: 'upstream_error',
  });
  expect(settled.ok).toBe(true);
  expect(await capacityTokens(h)).toEqual({ default: 0, backup: 0 });
});

test('a fallback without room takes nothing, and the call keeps what it took', async ({
  start,
}) => {
  const h = await start(config(400));
  const id = await admittedOnDefault(h);
  expect(await h.client.moveCapacity(move(id, 'backup', 'default'))).toEqual({
    ok: true,
    value: { moved: false },
  });
  expect(await capacityTokens(h)).toEqual({ default: 500, backup: 0 });
});

test('a fallback that declares nothing gives back the first upstream; unknown names move nothing', async ({
  start,
}) => {
  const h = await start(config(10_000));
  const id = await admittedOnDefault(h);
  expect(await h.client.moveCapacity(move(id, 'spare', 'default'))).toEqual({
    ok: true,
    value: { moved: true },
  });
  expect(await capacityTokens(h)).toEqual({ default: 0, backup: 0 });
  for (const bad of [
    { ...move(id, 'nowhere', 'default') },
    { ...move(id, 'backup'), tenant: 'no-such-team' },
    { ...move(id, 'backup'), model: 'gpt-4o' }, // backup is not one of its upstreams
  ]) {
    expect(await h.client.moveCapacity(bad)).toEqual({ ok: true, value: { moved: false } });
  }
  expect(await capacityTokens(h)).toEqual({ default: 0, backup: 0 });
});
