import { deadLetterStream, type NatsNames, type ReservationCreated } from '@holdfast/events';
import { ensureEventsStream, readDeadLetters } from '@holdfast/runtime';
import { waitFor, type NatsConnection, type Redis } from '@holdfast/testkit';
import { jetstreamManager } from '@nats-io/jetstream';
import { expect } from 'vitest';
import {
  admissionOf,
  BASE_CONFIG,
  miniCall,
  readEvents,
  authorityTest as test,
} from './harness.js';
import type { TestAuthority } from '../src/testing.js';

/** Admits one call (5 tokens in, 5 out), waits until its reservation.created is stored: that event. */
async function admitAndSeeEvent(
  h: TestAuthority,
  nc: NatsConnection,
  names: NatsNames,
): Promise<ReservationCreated> {
  const { reservationId } = admissionOf(await h.client.admit(miniCall(5, 5)));
  return waitFor(async () =>
    (await readEvents(nc, names)).find(
      (e): e is ReservationCreated =>
        e.type === 'reservation.created' && e.reservationId === reservationId,
    ),
  );
}

test('an event relayed twice (crash between publish and delete) is stored once', async ({
  iso,
  nc,
  redis,
  start,
}) => {
  const h = await start(BASE_CONFIG);
  const created = await admitAndSeeEvent(h, nc, iso.names);
  const { reservationId } = created;
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
    expiresAt: String(Date.parse(created.expiresAt)),
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
  // The relay deletes what it relayed once JetStream has acked it, so the released event can
  // be read before its entry is gone (seen under load): wait for the deletes, not a moment.
  await waitFor(async () => (await redis.xlen(outbox)) === 0 || undefined, {
    what: `the relay deleting ${outbox}'s relayed entries`,
  });
});

/** Puts an entry no event schema accepts into the org's outbox (what a buggy script would write). */
async function addInvalidEntry(redis: Redis, outbox: string): Promise<string> {
  return (await redis.xadd(
    outbox,
    '*',
    'type',
    'reservation.created',
    'id',
    'not-a-uuid',
    'tenant',
    'support-bot',
  ))!;
}

test('an outbox entry that does not validate becomes a dead letter in the dead-letter stream and the relay moves on', async ({
  nc,
  redis,
  iso,
  start,
}) => {
  const h = await start(BASE_CONFIG);
  const outbox = `${iso.keyPrefix}:{support-bot}:outbox`;
  const entryId = await addInvalidEntry(redis, outbox);
  await admitAndSeeEvent(h, nc, iso.names);
  const jsm = await jetstreamManager(nc);
  const [letter, ...more] = await waitFor(async () => {
    const letters = await readDeadLetters(jsm, deadLetterStream(iso.names).name);
    return letters.length > 0 ? letters : undefined;
  });
  expect(more).toEqual([]);
  expect(letter).toMatchObject({
    service: 'budget-authority',
    subject: `${iso.names.eventsPrefix}.support-bot.reservation.created`,
    outboxEntry: `${outbox} ${entryId}`,
    deadLetterSubject: `${iso.token}.deadletter.outbox-relay`,
  });
  expect(letter!.reason).toMatch(/^outbox entry does not validate/);
  expect(JSON.parse(new TextDecoder().decode(letter!.data))).toMatchObject({ id: 'not-a-uuid' });
  // Relayed entries leave with the authority's next command, or alone after the relay's pause.
  await waitFor(async () => (await redis.xlen(outbox)) === 0 || undefined, {
    what: `the relay deleting ${outbox}'s relayed entries`,
  });
  expect(await redis.exists(`${outbox}:dead`)).toBe(0);
});

test('with the dead-letter stream unavailable an invalid entry stays in the outbox, events still flow, and it is parked once the stream is back', async ({
  nc,
  redis,
  iso,
  start,
}) => {
  const h = await start(BASE_CONFIG);
  const jsm = await jetstreamManager(nc);
  const dead = deadLetterStream(iso.names).name;
  await jsm.streams.delete(dead);
  const outbox = `${iso.keyPrefix}:{support-bot}:outbox`;
  const entryId = await addInvalidEntry(redis, outbox);
  await admitAndSeeEvent(h, nc, iso.names);
  // Not lost: the entry waits in the outbox while its dead letter cannot be stored.
  expect(await redis.xrange(outbox, '-', '+')).toEqual([[entryId, expect.any(Array)]]);

  await ensureEventsStream(jsm, iso.names);
  await waitFor(async () => (await redis.xlen(outbox)) === 0, {
    what: 'the entry parked once the stream is back',
  });
  const letters = await readDeadLetters(jsm, dead);
  expect(letters.map((l) => l.outboxEntry)).toEqual([`${outbox} ${entryId}`]);
  expect(letters[0]!.reason).toMatch(/^outbox entry does not validate/);
});
