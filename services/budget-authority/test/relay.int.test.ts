import { jetstreamManager } from '@nats-io/jetstream';
import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { admissionOf, BASE_CONFIG, newId, readEvents, authorityTest as test } from './harness.js';

test('an event relayed twice (crash between publish and delete) is stored once', async ({
  iso,
  nc,
  redis,
  start,
}) => {
  const h = await start(BASE_CONFIG);
  const reservationId = newId();
  admissionOf(
    await h.client.admit({
      reservationId,
      tenant: 'support-bot',
      keyId: null,
      useCase: 'UC-101',
      model: 'gpt-4o-mini',
      promptTokens: 5,
      maxTokens: 5,
    }),
  );
  const created = await waitFor(async () =>
    (await readEvents(nc, iso.names)).find((e) => e.type === 'reservation.created'),
  );
  const jsm = await jetstreamManager(nc);
  const before = (await jsm.streams.info(iso.names.eventsStream)).state.messages;

  // Put the same outbox entry back, as if the relay died after publishing it but before
  // deleting it; then a new event so we know the relay went past it.
  const outbox = `${iso.keyPrefix}:{support-bot}:outbox`;
  const fields = Object.entries({
    type: 'reservation.created',
    id: created.id,
    time: String(Date.parse(created.time)),
    tenant: created.tenant,
    org: created.org,
    reservationId,
    keyId: '',
    useCase: 'UC-101',
    model: 'gpt-4o-mini',
    mode: 'reserve',
    heldTokens: '10',
    heldMicroUsd: '4',
    promptTokens: '5',
    maxTokens: '5',
    requestedMaxTokens: '5',
    chargedTokens: '0',
    chargedMicroUsd: '0',
    expiresAt: String(
      Date.parse(created.type === 'reservation.created' ? created.expiresAt : created.time),
    ),
    windows: '',
  }).flat();
  await redis.xadd(outbox, '*', ...fields);
  await h.client.release({ reservationId, tenant: 'support-bot', reason: 'not_forwarded' });

  const after = await waitFor(async () => {
    const e = await readEvents(nc, iso.names);
    return e.some((x) => x.type === 'reservation.released') ? e : undefined;
  });
  expect(after.length).toBe(before + 1);
  expect(after.filter((e) => e.id === created.id)).toHaveLength(1);
  expect(await redis.xlen(outbox)).toBe(0);
});

test('an outbox entry that does not validate is parked in the dead-letter stream and the relay moves on', async ({
  nc,
  redis,
  iso,
  start,
}) => {
  const h = await start(BASE_CONFIG);
  const outbox = `${iso.keyPrefix}:{support-bot}:outbox`;
  await redis.xadd(
    outbox,
    '*',
    'type',
    'reservation.created',
    'id',
    'not-a-uuid',
    'tenant',
    'support-bot',
  );
  const reservationId = newId();
  admissionOf(
    await h.client.admit({
      reservationId,
      tenant: 'support-bot',
      keyId: null,
      useCase: 'UC-101',
      model: 'gpt-4o-mini',
      promptTokens: 5,
      maxTokens: 5,
    }),
  );
  await waitFor(async () =>
    (await readEvents(nc, iso.names)).some(
      (e) => e.type === 'reservation.created' && e.reservationId === reservationId,
    ),
  );
  const dead = await redis.xrange(`${outbox}:dead`, '-', '+');
  expect(dead).toHaveLength(1);
  expect(dead[0]![1]).toEqual(expect.arrayContaining(['id', 'not-a-uuid']));
  expect(await redis.xlen(outbox)).toBe(0);
});
