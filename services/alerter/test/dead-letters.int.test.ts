import { deadLetterStream, eventSubject } from '@holdfast/events';
import { readDeadLetters } from '@holdfast/runtime';
import { infraTest as test, waitFor } from '@holdfast/testkit';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { expect } from 'vitest';
import { alerterNames } from '../src/index.js';
import {
  cleanupAfterEach,
  publishEvents,
  quiescent,
  removeAlerterState,
  settled,
  startReplica,
  window,
} from './harness.js';

const cleanup = cleanupAfterEach();

test('an event the alerter cannot parse and a malformed webhook job are dead-lettered in the one stream, and the alerter goes on', async ({
  nc,
  natsUrl,
  iso,
}) => {
  cleanup(() => removeAlerterState(nc, iso.names));
  const replica = await startReplica({
    natsUrl,
    names: iso.names,
    config: { tenants: [{ id: 'team-d', budgets: [{ window: 'month', limit: 1_000 }] }] },
  });
  cleanup(() => replica.stop());
  const js = jetstream(nc);
  const poison = eventSubject(iso.names, 'team-d', 'reservation.settled');
  await js.publish(poison, '{not json');
  const job = `${alerterNames(iso.names).webhookSubjectPrefix}.finance`;
  await js.publish(job, 'not a job');
  // After both, a valid event is still handled.
  await publishEvents(nc, iso.names, [
    settled({
      tenant: 'team-d',
      time: new Date(),
      charged: 10,
      windows: [window('team-d', 1_000, 10)],
    }),
  ]);

  const jsm = await jetstreamManager(nc);
  const letters = await waitFor(async () => {
    const l = await readDeadLetters(jsm, deadLetterStream(iso.names).name);
    return l.length === 2 ? l : undefined;
  });
  const bySource = new Map(letters.map((l) => [l.deadLetterSubject.split('.').at(-1), l]));
  expect(bySource.get('alerter')).toMatchObject({
    reason: 'event is not valid JSON',
    service: 'alerter',
    subject: poison,
    stream: iso.names.eventsStream,
    streamSeq: 1,
    deliveryCount: 1,
  });
  expect(bySource.get('alerter-webhooks')).toMatchObject({
    service: 'alerter',
    subject: job,
    stream: alerterNames(iso.names).webhookStream,
  });
  expect(bySource.get('alerter-webhooks')!.reason).toMatch(/^malformed delivery job/);
  await waitFor(() => quiescent(nc, iso.names), { what: 'every event handled, no job left' });
});
