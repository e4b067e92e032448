import { eventSubject } from '@holdfast/events';
import {
  infraTest as test,
  startRestartableNatsServer,
  waitFor,
  serverBinary,
} from '@holdfast/testkit';
import { jetstream, jetstreamManager, type JsMsg } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { expect } from 'vitest';
import { acking, consumerOn } from '../../test/consumer-on.js';
import { ensureEventsStream } from '../nats.js';

/** Deliveries by stream sequence: how many times each came to the handler. */
function tally(): { seen: Map<number, number>; take: (m: JsMsg) => void } {
  const seen = new Map<number, number>();
  return { seen, take: (m) => void seen.set(m.seq, (seen.get(m.seq) ?? 0) + 1) };
}

const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('bursts: what is stored between two pulls arrives together, not message by message', async ({
  nc,
  natsUrl,
  iso,
}) => {
  await ensureEventsStream(await jetstreamManager(nc), iso.names);
  const arrivals: number[] = [];
  const { stop } = await consumerOn(natsUrl, iso.names.eventsStream, {
    everyMs: 250,
    pullSize: 100,
    onMessage: acking(() => arrivals.push(Date.now())),
  });
  try {
    const js = jetstream(nc);
    // 40 messages 10 ms apart over ~400 ms: consume() hands each over as it is stored.
    for (let i = 0; i < 40; i++) {
      await js.publish(eventSubject(iso.names, 'team', 'reservation.created'), '{}');
      await delay(10);
    }
    await waitFor(() => arrivals.length === 40, { what: 'every message' });
    // A burst: what arrives within 20 ms of its first. One per pull: two or three pulls fall
    // in the ~400-500 ms of publishing, and one after. consume() makes one per message.
    let bursts = 0;
    let start = -Infinity;
    for (const at of arrivals) {
      if (at - start <= 20) continue;
      bursts += 1;
      start = at;
    }
    expect(bursts).toBeLessThanOrEqual(5);
  } finally {
    await stop();
  }
});

test('bursts: a quiet consumer waits for the next message instead of pulling every interval, and gets it at once', async ({
  nc,
  natsUrl,
  iso,
}) => {
  await ensureEventsStream(await jetstreamManager(nc), iso.names);
  const arrivals: number[] = [];
  const { stop } = await consumerOn(natsUrl, iso.names.eventsStream, {
    everyMs: 250,
    onMessage: acking(() => arrivals.push(Date.now())),
  });
  // The pull requests themselves, as any subscriber of their subject sees them.
  const requests = nc.subscribe(`$JS.API.CONSUMER.MSG.NEXT.${iso.names.eventsStream}.test`);
  let pulls = 0;
  void (async () => {
    for await (const _ of requests) pulls += 1;
  })();
  try {
    await delay(1_600);
    // A waiting pull lasts a second (idle heartbeat 5 s): 1-2 of them, not 6 pulls of 250 ms.
    expect(pulls).toBeLessThanOrEqual(3);
    const sent = Date.now();
    await jetstream(nc).publish(eventSubject(iso.names, 'team', 'reservation.created'), '{}');
    await waitFor(() => arrivals.length === 1, { what: 'the message' });
    expect(arrivals[0]! - sent).toBeLessThan(150);
  } finally {
    requests.unsubscribe();
    await stop();
  }
});

test('bursts: every message under load is handed over exactly once, a handler holding backpressure now and then included', async ({
  nc,
  natsUrl,
  iso,
}) => {
  const jsm = await jetstreamManager(nc);
  await ensureEventsStream(jsm, iso.names);
  const { seen, take } = tally();
  const { stop } = await consumerOn(natsUrl, iso.names.eventsStream, {
    everyMs: 50,
    pullSize: 64,
    onMessage: (m) => {
      take(m);
      m.ack();
      // Every 50th message holds the loop a while: the rest of its batch waits, none is lost.
      return m.seq % 50 === 0 ? delay(20).then(() => undefined) : undefined;
    },
  });
  try {
    const js = jetstream(nc);
    const total = 3_000;
    // Published while the consumer pulls: batches full and partial, backlog and quiet.
    for (let i = 0; i < total; i += 100) {
      await Promise.all(
        Array.from({ length: 100 }, () =>
          js.publish(eventSubject(iso.names, 'team', 'reservation.created'), '{}'),
        ),
      );
    }
    await waitFor(() => seen.size === total, { timeoutMs: 30_000, what: 'every message' });
    await waitFor(
      async () => (await jsm.consumers.info(iso.names.eventsStream, 'test')).num_ack_pending === 0,
      { what: 'every message acked' },
    );
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
    expect([...seen.keys()].sort((a, b) => a - b)).toEqual(
      Array.from({ length: total }, (_, i) => i + 1),
    );
    expect((await jsm.consumers.info(iso.names.eventsStream, 'test')).num_redelivered).toBe(0);
  } finally {
    await stop();
  }
});

test('bursts: no more than pullSize pulled ahead of the handlers, and no more than `concurrency` in them', async ({
  nc,
  natsUrl,
  iso,
}) => {
  const jsm = await jetstreamManager(nc);
  await ensureEventsStream(jsm, iso.names);
  const js = jetstream(nc);
  const total = 60;
  for (let i = 0; i < total; i++) {
    await js.publish(eventSubject(iso.names, 'team', 'reservation.created'), '{}');
  }
  const { seen, take } = tally();
  let running = 0;
  let mostRunning = 0;
  const { stop } = await consumerOn(natsUrl, iso.names.eventsStream, {
    everyMs: 20,
    pullSize: 5,
    concurrency: 2,
    onMessage: async (m) => {
      take(m);
      running += 1;
      mostRunning = Math.max(mostRunning, running);
      await delay(30);
      running -= 1;
      m.ack();
    },
  });
  let mostOut = 0;
  try {
    // What the server has let out unacked: in the handlers, buffered, on its way, or acked with
    // the ack not yet read by the server.
    while (seen.size < total) {
      const info = await jsm.consumers.info(iso.names.eventsStream, 'test');
      mostOut = Math.max(mostOut, info.num_ack_pending);
      await delay(5);
    }
  } finally {
    await stop();
  }
  expect(mostRunning).toBe(2);
  expect(mostOut).toBeGreaterThan(2);
  // The server's count also holds acks still on their way to it (written at the end of the
  // event-loop turn): at most one for each handler that just finished (CI saw 8 once).
  expect(mostOut).toBeLessThanOrEqual(2 + 5 + 2);
  expect([...seen.values()].every((n) => n === 1)).toBe(true);
});

test('bursts: a nak with delay comes back after the delay with no new traffic to pull for', async ({
  nc,
  natsUrl,
  iso,
}) => {
  await ensureEventsStream(await jetstreamManager(nc), iso.names);
  const deliveries: { count: number; at: number }[] = [];
  const { stop } = await consumerOn(natsUrl, iso.names.eventsStream, {
    everyMs: 50,
    onMessage: (m) => {
      deliveries.push({ count: m.info.deliveryCount, at: Date.now() });
      if (m.info.deliveryCount < 3) m.nak(600);
      else m.ack();
      return undefined;
    },
  });
  try {
    await jetstream(nc).publish(eventSubject(iso.names, 'team', 'reservation.created'), '{}');
    await waitFor(() => deliveries.length === 3, { what: 'two redeliveries' });
    expect(deliveries.map((d) => d.count)).toEqual([1, 2, 3]);
    for (const i of [1, 2]) {
      expect(deliveries[i]!.at - deliveries[i - 1]!.at).toBeGreaterThanOrEqual(550);
    }
  } finally {
    await stop();
  }
});

test('bursts: a consumer deleted under the loop is created again and consumption goes on', async ({
  nc,
  natsUrl,
  iso,
}) => {
  const jsm = await jetstreamManager(nc);
  await ensureEventsStream(jsm, iso.names);
  const { seen, take } = tally();
  const { consumer, stop } = await consumerOn(natsUrl, iso.names.eventsStream, {
    everyMs: 50,
    idleHeartbeatMs: 300,
    onMessage: acking((m) => take(m)),
  });
  try {
    const js = jetstream(nc);
    await js.publish(eventSubject(iso.names, 'team', 'reservation.created'), '{}');
    await waitFor(() => seen.size === 1, { what: 'the first message' });
    await jsm.consumers.delete(iso.names.eventsStream, 'test');
    await js.publish(eventSubject(iso.names, 'team', 'reservation.settled'), '{}');
    // The new durable starts from the stream's first message (DeliverPolicy.All).
    await waitFor(() => seen.has(2), { what: 'the message after, from a new durable' });
    expect(consumer.restarts).toBeGreaterThanOrEqual(1);
    expect(consumer.consuming).toBe(true);
  } finally {
    await stop();
  }
});

test('bursts: through a NATS server restart consumption resumes at once (not after missed heartbeats) and nothing is lost', async ({
  iso,
}) => {
  const server = await startRestartableNatsServer(serverBinary('nats'));
  const nc = await connect({
    servers: server.url,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 100,
  });
  const { seen, take } = tally();
  let consumer: Awaited<ReturnType<typeof consumerOn>> | undefined;
  try {
    const jsm = await jetstreamManager(nc);
    await ensureEventsStream(jsm, iso.names);
    // The services' idle heartbeat: 3 missed would be 15 s, past the wait below.
    consumer = await consumerOn(server.url, iso.names.eventsStream, {
      everyMs: 50,
      idleHeartbeatMs: 5_000,
      onMessage: acking((m) => take(m)),
    });
    const js = jetstream(nc);
    const publish = async (n: number) => {
      for (let i = 0; i < n; i++) {
        await js.publish(eventSubject(iso.names, 'team', 'reservation.created'), '{}');
      }
    };
    await publish(200);
    await waitFor(() => seen.size === 200, { what: 'the messages before' });
    await server.halt();
    await server.restart();
    await waitFor(() => publish(200).then(() => true), {
      timeoutMs: 20_000,
      what: 'JetStream back',
    });
    // The pull out when the server went is lost with it: a new one goes after the reconnect.
    await waitFor(() => seen.size >= 400, { timeoutMs: 8_000, what: 'the messages after' });
    expect([...seen.keys()].sort((a, b) => a - b)).toEqual(
      Array.from({ length: seen.size }, (_, i) => i + 1),
    );
    await waitFor(
      async () => {
        const info = await jsm.consumers.info(iso.names.eventsStream, 'test');
        return info.num_ack_pending === 0 && info.num_pending === 0;
      },
      { what: 'every message acked' },
    );
    expect(consumer.consumer.consuming).toBe(true);
  } finally {
    await consumer?.stop();
    await nc.close();
    await server.stop();
  }
});
