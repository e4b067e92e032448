import { randomUUID } from 'node:crypto';
import { deadLetterStream, eventSubject, HoldfastEvent, type NatsNames } from '@holdfast/events';
import { readDeadLetters } from '@holdfast/runtime';
import { waitFor } from '@holdfast/testkit';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { expect } from 'vitest';
import { alerterNames } from '../src/index.js';
import {
  cleanupAfterEach,
  publishEvents,
  quiescent,
  settled,
  startReplica,
  window,
  alerterTest as test,
} from './harness.js';

const cleanup = cleanupAfterEach();

/** One replica for team-d (a month budget), its state removed and it stopped after the test. */
async function started(natsUrl: string, names: NatsNames) {
  const replica = await startReplica({
    natsUrl,
    names,
    config: { tenants: [{ id: 'team-d', budgets: [{ window: 'month', limit: 1_000 }] }] },
  });
  cleanup(() => replica.stop());
  return replica;
}

test('an event the alerter cannot parse and a malformed webhook job are dead-lettered in the one stream, and the alerter goes on', async ({
  nc,
  natsUrl,
  iso,
}) => {
  await started(natsUrl, iso.names);
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

/** A call's records of its upstream capacity: no windows, nothing an alert reads. */
const capacityRecords = {
  'a move to a fallback upstream (reservation.moved, no windows)': {
    type: 'reservation.moved',
    upstream: 'backup',
    fromUpstream: 'default',
    tokens: 500,
  },
  "a retry's request of its upstream (reservation.retried, no windows)": {
    type: 'reservation.retried',
    upstream: 'default',
  },
};

for (const [what, fields] of Object.entries(capacityRecords)) {
  test(`${what} is handled and acked, never dead-lettered`, async ({ nc, natsUrl, iso }) => {
    const replica = await started(natsUrl, iso.names);
    const event = HoldfastEvent.parse({
      id: randomUUID(),
      schemaVersion: 1,
      time: new Date().toISOString(),
      tenant: 'team-d',
      org: 'team-d',
      reservationId: randomUUID(),
      model: 'gpt-4o-mini',
      ...fields,
    });
    await publishEvents(nc, iso.names, [event]);
    await waitFor(() => quiescent(nc, iso.names), { what: `the ${fields.type} handled` });
    const jsm = await jetstreamManager(nc);
    const dead = await jsm.streams.info(deadLetterStream(iso.names).name);
    expect(dead.state.messages).toBe(0);
    const events = await replica.registry.getSingleMetric('holdfast_alerter_events_total')?.get();
    expect(
      events?.values.find((v) => v.labels.type === fields.type && v.labels.result === 'ok')?.value,
    ).toBe(1);
  });
}
