import { once } from 'node:events';
import { createConnection, type Socket } from 'node:net';
import { eventSubject, type NatsNames } from '@holdfast/events';
import { infraTest as test, waitFor } from '@holdfast/testkit';
import { jetstream, jetstreamManager, type JsMsg } from '@nats-io/jetstream';
import { nanos, type NatsConnection } from '@nats-io/transport-node';
import { describe, expect } from 'vitest';
import { acking, consumerOn, MODES } from '../../test/consumer-on.js';
import { ensureEventsStream } from '../nats.js';

const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The ack wait of the stop tests that may see a message come back only after it. */
const STOP_TEST_ACK_WAIT_MS = 3_000;

/**
 * The events stream of a test, its manager, a publish of one event, and a wait for the
 * consumer `test`'s pull to be waiting at the server, with nothing unacked (it is idle).
 */
async function eventsOf(nc: NatsConnection, names: NatsNames) {
  const jsm = await jetstreamManager(nc);
  await ensureEventsStream(jsm, names);
  const js = jetstream(nc);
  const stream = names.eventsStream;
  return {
    jsm,
    js,
    publish: () => js.publish(eventSubject(names, 'team', 'reservation.created'), '{}'),
    // consume() keeps more than one pull open (it pulls again as deliveries come in).
    waitingPullOut: () =>
      waitFor(
        async () => {
          const info = await jsm.consumers.info(stream, 'test');
          return info.num_waiting >= 1 && info.num_ack_pending === 0;
        },
        { what: 'the waiting pull' },
      ),
  };
}

/** A plain TCP connection to NATS, past its handshake: what is written on it goes at once. */
async function rawConnection(natsUrl: string): Promise<Socket> {
  const { hostname, port } = new URL(natsUrl);
  const socket = createConnection({ host: hostname, port: Number(port) });
  await once(socket, 'data'); // INFO
  socket.write('CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n');
  await once(socket, 'data'); // PONG
  return socket;
}

/** Every stop() test runs on both loops: they share one stop path. */
describe.each(MODES)('$mode', ({ everyMs }) => {
  test('stop() hands back what is buffered at once and pulls nothing after', async ({
    nc,
    natsUrl,
    iso,
  }) => {
    const { jsm, js, publish } = await eventsOf(nc, iso.names);
    for (let i = 0; i < 5; i++) await publish();
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => (release = r));
    const handled: number[] = [];
    const {
      consumer,
      nc: own,
      stop,
    } = await consumerOn(natsUrl, iso.names.eventsStream, {
      everyMs,
      onMessage: async (m) => {
        handled.push(m.seq);
        // The first message holds the loop: the other four stay buffered behind it.
        if (m.seq === 1) await held;
        m.ack();
      },
    });
    try {
      await waitFor(() => handled.length === 1, { what: 'the first message in the handler' });
      await waitFor(
        async () =>
          (await jsm.consumers.info(iso.names.eventsStream, 'test')).num_ack_pending === 5,
        { what: 'the batch out' },
      );
      const stopped = consumer.stop();
      release();
      await stopped;
      expect(handled).toEqual([1]);
      // Nothing pulled after stop: a new message stays in the stream, and no pull waits.
      await js.publish(eventSubject(iso.names, 'team', 'reservation.settled'), '{}');
      await delay(300);
      const info = await jsm.consumers.info(iso.names.eventsStream, 'test');
      expect(info.num_waiting).toBe(0);
      expect(info.num_pending).toBe(1);
      expect(handled).toEqual([1]);
    } finally {
      // nc.close(), not drain(): what was not written yet is dropped.
      await stop();
      expect(own.isClosed()).toBe(true);
    }
    // The four buffered were nak'd, not left to the ack wait (30 s): the next replica gets
    // them now.
    const next: { seq: number; count: number }[] = [];
    const replica = await consumerOn(natsUrl, iso.names.eventsStream, {
      everyMs,
      onMessage: acking((m) => next.push({ seq: m.seq, count: m.info.deliveryCount })),
    });
    try {
      await waitFor(() => next.length === 5, { timeoutMs: 3_000, what: 'the rest, at once' });
    } finally {
      await replica.stop();
    }
    expect(next.sort((x, y) => x.seq - y.seq)).toEqual([
      { seq: 2, count: 2 },
      { seq: 3, count: 2 },
      { seq: 4, count: 2 },
      { seq: 5, count: 2 },
      { seq: 6, count: 1 },
    ]);
  });

  test('what a pull brings during stop() is handed back before stop() returns, though the connection is closed right after (consume(): by the ack wait, see below)', async ({
    nc,
    natsUrl,
    iso,
  }) => {
    const { jsm, publish, waitingPullOut } = await eventsOf(nc, iso.names);
    const stream = iso.names.eventsStream;
    // Short, so what nats-server 2.9.10 leaves to the ack wait in consume() mode is seen here.
    const durable = { durable_name: 'test', ack_wait: nanos(STOP_TEST_ACK_WAIT_MS) };
    let published = 0;
    // Every delivery to a handler, by sequence, across the consumers one after the other.
    const seen = new Map<number, number>();
    const handler = (m: JsMsg) => {
      seen.set(m.seq, (seen.get(m.seq) ?? 0) + 1);
      return m.ackAck().then(() => undefined);
    };
    for (let round = 0; round < 5; round++) {
      const { consumer, stop } = await consumerOn(natsUrl, stream, {
        everyMs,
        durable,
        onMessage: handler,
      });
      try {
        // Bursts: at once. consume(): by the ack wait (see the end of this test).
        await waitFor(() => seen.size === published, {
          timeoutMs: everyMs === undefined ? STOP_TEST_ACK_WAIT_MS + 5_000 : 3_000,
          what: 'the messages before',
        });
        await waitingPullOut();
        // Published as the stop begins: the first may come to the waiting pull (handed
        // back), the rest stay in the stream.
        const stopping = consumer.stop();
        await Promise.all(Array.from({ length: 5 }, publish));
        published += 5;
        await stopping;
      } finally {
        // nc.close(), not drain(): what was not written yet is dropped.
        await stop();
      }
    }
    const { stop } = await consumerOn(natsUrl, stream, { everyMs, durable, onMessage: handler });
    try {
      // Bursts: not after the ack wait, nothing a stopped consumer's pull brought is left
      // pending, and each message is handled once. consume(): nothing is lost either, but
      // nats-server 2.9.10 may leave one message of a stop to the ack wait and deliver the one
      // before its position again (docs/events.md, "Consuming").
      await waitFor(() => seen.size === published, {
        timeoutMs: everyMs === undefined ? STOP_TEST_ACK_WAIT_MS + 5_000 : 3_000,
        what: 'every message',
      });
      const counts = [...seen.values()];
      if (everyMs === undefined) {
        // The last one delivered before a stop may come again as new.
        expect(counts.every((n) => n === 1 || n === 2)).toBe(true);
      } else {
        expect(counts.every((n) => n === 1)).toBe(true);
      }
      // A handler notes a message before its ack is answered.
      await waitFor(async () => (await jsm.consumers.info(stream, 'test')).num_ack_pending === 0, {
        timeoutMs: 3_000,
        what: 'nothing pending',
      });
    } finally {
      await stop();
    }
  });

  // One: no pull follows it (consume() pulls again only after a quarter of its batch), so
  // every pull is left waiting, with no subscriber, when the naks come.
  for (const IN_FLIGHT of [1, 5]) {
    test(`${IN_FLIGHT} message(s) on their way to the consumer as stop() is called are handed back at once, each redelivered once`, async ({
      nc,
      natsUrl,
      iso,
    }) => {
      const { jsm, waitingPullOut } = await eventsOf(nc, iso.names);
      const stream = iso.names.eventsStream;
      const handled: { seq: number; count: number }[] = [];
      const onMessage = acking((m) => handled.push({ seq: m.seq, count: m.info.deliveryCount }));
      const { consumer, stop } = await consumerOn(natsUrl, stream, { everyMs, onMessage });
      const raw = await rawConnection(natsUrl);
      let handedBack: number;
      try {
        await waitingPullOut();
        // Stored, and handed to the waiting pull, while this process is busy: what the server
        // sent is in the consumer's socket, not read yet, when stop() is called. (Written on a
        // socket of its own: a client's publish waits for the next turn of the event loop.)
        const busyUntil = performance.now() + 200;
        raw.write(
          `PUB ${eventSubject(iso.names, 'team', 'reservation.created')} 2\r\n{}\r\n`.repeat(
            IN_FLIGHT,
          ),
        );
        while (performance.now() < busyUntil) {
          // a synchronous stretch: no socket is read
        }
        await consumer.stop();
        expect(handled).toEqual([]);
        // What the server gave the stopped consumer (consume(): all; bursts: the first).
        handedBack = (await jsm.consumers.info(stream, 'test')).num_ack_pending;
      } finally {
        raw.destroy();
        await stop();
      }
      const { stop: stopNext } = await consumerOn(natsUrl, stream, { everyMs, onMessage });
      try {
        // Not after the ack wait (30 s).
        await waitFor(() => handled.length >= IN_FLIGHT, {
          timeoutMs: 3_000,
          what: 'every message',
        });
        await delay(300);
      } finally {
        await stopNext();
      }
      // Each once; what the stopped consumer had is a redelivery of its nak (count 2), not
      // the same message delivered as new after the consumer's position stepped back.
      const seqs = handled.map((h) => h.seq).sort((a, b) => a - b);
      expect(seqs).toEqual(Array.from({ length: IN_FLIGHT }, (_, i) => i + 1));
      expect(handedBack).toBeGreaterThan(0);
      expect(handled.filter((h) => h.count === 2)).toHaveLength(handedBack);
      expect((await jsm.consumers.info(stream, 'test')).num_ack_pending).toBe(0);
    });
  }

  test('stop() of an idle consumer ends its waiting pull at once, and a message published right after goes to the next consumer, delivered once', async ({
    nc,
    natsUrl,
    iso,
  }) => {
    const { jsm, publish, waitingPullOut } = await eventsOf(nc, iso.names);
    const stopMs: number[] = [];
    const firsts: number[] = [];
    for (let round = 0; round < 3; round++) {
      const { consumer, stop } = await consumerOn(natsUrl, iso.names.eventsStream, {
        everyMs,
        onMessage: acking((m) => firsts.push(m.info.deliveryCount)),
      });
      try {
        await waitingPullOut();
        const startedAt = performance.now();
        await consumer.stop();
        stopMs.push(performance.now() - startedAt);
        // The pull is gone from the server, not left to take this one with nobody to hand it to.
        await publish();
      } finally {
        await stop();
      }
      const { stop: stopNext } = await consumerOn(natsUrl, iso.names.eventsStream, {
        everyMs,
        onMessage: acking((m) => firsts.push(m.info.deliveryCount)),
      });
      try {
        // Not after the ack wait (30 s).
        await waitFor(() => firsts.length === round + 1, {
          timeoutMs: 3_000,
          what: 'the message',
        });
      } finally {
        await stopNext();
      }
    }
    expect(firsts).toEqual([1, 1, 1]);
    expect((await jsm.consumers.info(iso.names.eventsStream, 'test')).num_ack_pending).toBe(0);
    // Not the waiting pull's second: stop() waited it out (0.6-1 s) before.
    expect(Math.max(...stopMs)).toBeLessThan(200);
  });
});
