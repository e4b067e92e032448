import { deadLetterStream, deadLetterSubject, eventSubject } from '@holdfast/events';
import { infraTest as test, waitFor } from '@holdfast/testkit';
import { jetstreamManager } from '@nats-io/jetstream';
import { expect } from 'vitest';
import { ensureEventsStream } from './nats.js';

test('ensureEventsStream creates the events and dead-letter streams, idempotently, and both keep what is published', async ({
  nc,
  iso,
}) => {
  const jsm = await jetstreamManager(nc);
  await ensureEventsStream(jsm, iso.names);
  await ensureEventsStream(jsm, iso.names);
  nc.publish(eventSubject(iso.names, 'team', 'reservation.created'), '{}');
  nc.publish(deadLetterSubject(iso.names, 'billing-aggregator'), 'poison');
  const dead = deadLetterStream(iso.names);
  await waitFor(async () => (await jsm.streams.info(dead.name)).state.messages === 1, {
    what: 'the dead letter stored',
  });
  expect((await jsm.streams.info(iso.names.eventsStream)).state.messages).toBe(1);
  const info = await jsm.streams.info(iso.names.eventsStream);
  expect(info.config.duplicate_window).toBe(600_000_000_000);
});

test('ensureEventsStream leaves an operator-tuned stream alone (replicas, age) and adds what is missing', async ({
  nc,
  iso,
}) => {
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({
    name: iso.names.eventsStream,
    subjects: [`${iso.names.eventsPrefix}.>`],
    max_age: 3_600_000_000_000,
    duplicate_window: 60_000_000_000,
  });
  await ensureEventsStream(jsm, iso.names);
  const info = await jsm.streams.info(iso.names.eventsStream);
  expect(info.config.max_age).toBe(3_600_000_000_000);
  expect(info.config.duplicate_window).toBe(600_000_000_000);
});
