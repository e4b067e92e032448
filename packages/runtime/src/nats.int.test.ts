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
