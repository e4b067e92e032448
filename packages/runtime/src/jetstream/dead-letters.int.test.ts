import { deadLetterStream, eventSubject } from '@holdfast/events';
import { infraTest as test, waitFor } from '@holdfast/testkit';
import { jetstream, jetstreamManager, type JsMsg } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { expect } from 'vitest';
import { createLogger } from '../logger.js';
import { ensureEventsStream } from '../nats.js';
import { DurableConsumer } from './consumer.js';
import { DeadLetters } from './dead-letters.js';
import { readDeadLetters } from './read-dead-letters.js';

const logger = createLogger({ name: 'dead-letter-test', level: 'silent' });

/** A consumer on the events stream that dead-letters every message and records each outcome. */
async function poisonConsumer(
  nc: Parameters<typeof jetstream>[0],
  names: Parameters<typeof ensureEventsStream>[1],
) {
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  const letters = new DeadLetters({
    nc,
    names,
    service: 'test-service',
    source: 'test-consumer',
    logger,
    redeliver: { initialMs: 200, maxMs: 200 },
  });
  const outcomes: { parked: boolean; deliveryCount: number }[] = [];
  const handled: JsMsg[] = [];
  const consumer = new DurableConsumer({
    nc,
    js,
    jsm,
    stream: names.eventsStream,
    durable: { durable_name: 'test-consumer', ack_wait: nanos(30_000) },
    pullSize: 10,
    restart: { initialMs: 50, maxMs: 200 },
    redeliver: { initialMs: 200, maxMs: 200 },
    maxMissedHeartbeats: 3,
    logger,
    onMessage: async (m) => {
      handled.push(m);
      const deliveryCount = m.info.deliveryCount;
      outcomes.push({ parked: await letters.term(m, `bad\nmessage ${m.seq}`), deliveryCount });
    },
  });
  await consumer.start();
  const pending = async () =>
    (await jsm.consumers.info(names.eventsStream, 'test-consumer')).num_ack_pending;
  return { consumer, letters, outcomes, pending, handled };
}

test('a poison message is terminated once its dead letter is stored, in the one format', async ({
  nc,
  iso,
}) => {
  const jsm = await jetstreamManager(nc);
  await ensureEventsStream(jsm, iso.names);
  const { consumer, outcomes, pending } = await poisonConsumer(nc, iso.names);
  try {
    const subject = eventSubject(iso.names, 'team', 'reservation.settled');
    await jetstream(nc).publish(subject, '{not json');
    await waitFor(async () => outcomes.length === 1 && (await pending()) === 0, {
      what: 'the message parked and terminated',
    });
    const [letter, ...more] = await readDeadLetters(jsm, deadLetterStream(iso.names).name);
    expect(more).toEqual([]);
    expect(letter).toMatchObject({
      reason: 'bad message 1',
      service: 'test-service',
      subject,
      stream: iso.names.eventsStream,
      streamSeq: 1,
      deliveryCount: 1,
      deadLetterSubject: `${iso.token}.deadletter.test-consumer`,
    });
    expect(new TextDecoder().decode(letter!.data)).toBe('{not json');
    expect(outcomes).toEqual([{ parked: true, deliveryCount: 1 }]);
  } finally {
    await consumer.stop();
  }
});

test('with the dead-letter stream unavailable the message is nak-ed, never terminated, and parked once it is back', async ({
  nc,
  iso,
}) => {
  const jsm = await jetstreamManager(nc);
  await ensureEventsStream(jsm, iso.names);
  const dead = deadLetterStream(iso.names).name;
  await jsm.streams.delete(dead);
  const { consumer, outcomes, pending } = await poisonConsumer(nc, iso.names);
  try {
    await jetstream(nc).publish(eventSubject(iso.names, 'team', 'reservation.settled'), 'poison');
    await waitFor(() => outcomes.length >= 2, { what: 'a redelivery after the failed park' });
    expect(outcomes.every((o) => !o.parked)).toBe(true);
    // Still the consumer's: unacked and coming back, not terminated.
    expect(await pending()).toBe(1);

    await ensureEventsStream(jsm, iso.names);
    await waitFor(async () => outcomes.at(-1)?.parked === true && (await pending()) === 0, {
      what: 'parked once the stream is back',
    });
    const letters = await readDeadLetters(jsm, dead);
    expect(letters).toHaveLength(1);
    expect(letters[0]!.deliveryCount).toBeGreaterThanOrEqual(2);
  } finally {
    await consumer.stop();
  }
});

test('parking the same message twice (a term lost in a crash) stores one dead letter', async ({
  nc,
  iso,
}) => {
  const jsm = await jetstreamManager(nc);
  await ensureEventsStream(jsm, iso.names);
  const { consumer, letters, outcomes, handled } = await poisonConsumer(nc, iso.names);
  try {
    await jetstream(nc).publish(eventSubject(iso.names, 'team', 'reservation.settled'), 'poison');
    await waitFor(() => outcomes.length === 1, { what: 'parked' });
    // The same message parked again, as after a crash between the dead letter and the term.
    expect(await letters.term(handled[0]!, 'again')).toBe(true);
    const stored = await readDeadLetters(jsm, deadLetterStream(iso.names).name);
    expect(stored.map((l) => l.reason)).toEqual(['bad message 1']);
  } finally {
    await consumer.stop();
  }
});
