import { randomUUID } from 'node:crypto';
import {
  infraTest as test,
  readStream,
  type Isolation,
  type NatsConnection,
} from '@holdfast/testkit';
import { DiscardPolicy, jetstreamManager } from '@nats-io/jetstream';
import { expect } from 'vitest';
import { JetStreamPublisher, type Publish } from './publisher.js';

const events = (prefix: string, n: number): Publish[] =>
  Array.from({ length: n }, (_, i) => ({
    subject: `${prefix}.t.reservation.created`,
    data: JSON.stringify({ i }),
    msgId: randomUUID(),
  }));

/** The test's stream manager, events stream name and a publisher on its connection. */
async function setUp(nc: NatsConnection, iso: Isolation) {
  return {
    jsm: await jetstreamManager(nc),
    stream: iso.names.eventsStream,
    publisher: new JetStreamPublisher(nc),
  };
}

test('a round is stored once, in its order, and a round republished (a crash before the delete) stores nothing more', async ({
  nc,
  iso,
}) => {
  const { jsm, stream, publisher } = await setUp(nc, iso);
  await jsm.streams.add({ name: stream, subjects: [`${iso.names.eventsPrefix}.>`] });
  const first = events(iso.names.eventsPrefix, 300);
  const second = events(iso.names.eventsPrefix, 5);
  await publisher.publish(first, 2_000);
  await publisher.publish([...first.slice(100), ...second], 2_000);
  await publisher.publish([], 2_000);
  const stored = await readStream(nc, stream);
  expect(stored.map((m) => m.headers?.get('Nats-Msg-Id'))).toEqual(
    [...first, ...second].map((e) => e.msgId),
  );
  expect(stored.map((m) => m.string())).toEqual([...first, ...second].map((e) => e.data));
  publisher.close();
});

test('a round fails when no stream takes its subject, when the stream refuses an event, and when an ack does not come in time; a later round is not answered by its acks', async ({
  nc,
  iso,
}) => {
  const { jsm, stream, publisher } = await setUp(nc, iso);
  // No stream: NATS answers no responders at once (not after the timeout).
  const started = Date.now();
  await expect(publisher.publish(events(iso.names.eventsPrefix, 3), 10_000)).rejects.toThrow(
    /status 503/,
  );
  expect(Date.now() - started).toBeLessThan(5_000);

  // A full stream that discards new messages refuses the third.
  await jsm.streams.add({
    name: stream,
    subjects: [`${iso.names.eventsPrefix}.>`],
    max_msgs: 2,
    discard: DiscardPolicy.New,
  });
  await expect(publisher.publish(events(iso.names.eventsPrefix, 3), 2_000)).rejects.toThrow(
    /JetStream refused the message/,
  );
  expect((await jsm.streams.info(stream)).state.messages).toBe(2);

  // A subscriber that never answers stands for a JetStream that does not ack, one that
  // answers late for one whose acks come after the round gave up.
  const silent = nc.subscribe(`${iso.token}.silent.>`, { callback: () => undefined });
  const late = nc.subscribe(`${iso.token}.late.>`, {
    callback: (_, m) => {
      setTimeout(() => m.respond(JSON.stringify({ stream, seq: 1 })), 600);
    },
  });
  await nc.flush();
  await expect(publisher.publish(events(`${iso.token}.late`, 2), 200)).rejects.toThrow(
    /did not ack 2 of 2 in time/,
  );
  // The late acks come while this round waits: they are the other round's, not its own.
  await expect(publisher.publish(events(`${iso.token}.silent`, 2), 1_000)).rejects.toThrow(
    /did not ack 2 of 2 in time/,
  );
  silent.unsubscribe();
  late.unsubscribe();

  // Acks of the failed rounds (the stream's refusal came with acks of the first two) are not
  // counted for the next round: it resolves on its own acks only.
  await jsm.streams.update(stream, { max_msgs: -1 });
  const next = events(iso.names.eventsPrefix, 4);
  await publisher.publish(next, 2_000);
  expect((await jsm.streams.info(stream)).state.messages).toBe(6);
  publisher.close();
  await expect(publisher.publish(next, 2_000)).resolves.toBeUndefined();
});

test('rounds in flight at once are each answered by their own acks, their messages stored once with their headers', async ({
  nc,
  iso,
}) => {
  const { jsm, stream, publisher } = await setUp(nc, iso);
  await jsm.streams.add({ name: stream, subjects: [`${iso.names.eventsPrefix}.>`] });
  const rounds = Array.from({ length: 8 }, (_, r) =>
    events(iso.names.eventsPrefix, 1 + r * 7).map((e) => ({
      ...e,
      headers: [['Holdfast-Round', String(r)]] as const,
    })),
  );
  // A round that fails (a subject no stream takes) beside them fails alone.
  const [failed, ...stored] = await Promise.allSettled([
    publisher.publish(events(`${iso.token}.nowhere`, 2), 2_000),
    ...rounds.map((round) => publisher.publish(round, 2_000)),
  ]);
  expect(failed?.status).toBe('rejected');
  expect(stored.map((s) => s.status)).toEqual(rounds.map(() => 'fulfilled'));
  const messages = await readStream(nc, stream);
  const all = rounds.flat();
  expect(messages).toHaveLength(all.length);
  const byId = new Map(messages.map((m) => [m.headers?.get('Nats-Msg-Id'), m]));
  for (const e of all) {
    expect(byId.get(e.msgId)?.headers?.get('Holdfast-Round')).toBe(e.headers[0][1]);
  }
  publisher.close();
});
