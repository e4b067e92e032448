import {
  deadLetterStream,
  deadLetterSubject,
  eventSubject,
  namesWithPrefix,
} from '@holdfast/events';
import { infraTest as test, waitFor } from '@holdfast/testkit';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
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

test('ensureEventsStream from many processes at once (replicas starting together): every one succeeds', async ({
  natsUrl,
  iso,
}) => {
  // Separate connections, as separate replicas have: each looks, finds nothing and adds.
  const conns = await Promise.all(Array.from({ length: 6 }, () => connect({ servers: natsUrl })));
  try {
    const managers = await Promise.all(conns.map((c) => jetstreamManager(c)));
    for (let round = 0; round < 40; round++) {
      const names = namesWithPrefix(`${iso.token}r${round}`);
      const results = await Promise.allSettled(
        managers.map((jsm) => ensureEventsStream(jsm, names)),
      );
      expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
      await managers[0]!.streams.delete(names.eventsStream);
      await managers[0]!.streams.delete(`${names.eventsStream}_DEADLETTER`);
    }
  } finally {
    await Promise.all(conns.map((c) => c.close()));
  }
});
