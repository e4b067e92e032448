import { eventSubject } from '@holdfast/events';
import { infraTest as test, tcpProxy, waitFor } from '@holdfast/testkit';
import { jetstream, jetstreamManager, type JsMsg } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { describe, expect } from 'vitest';
import { acking, consumerOn, MODES } from '../../test/consumer-on.js';
import { ensureEventsStream } from '../nats.js';
import { nakLater } from './messages.js';

for (const { mode, everyMs } of MODES) {
  describe(mode, () => {
    test('missed heartbeats (the server goes silent, the connection stays up) restart the loop, and consumption goes on', async ({
      nc,
      natsUrl,
      iso,
    }) => {
      await ensureEventsStream(await jetstreamManager(nc), iso.names);
      const proxy = await tcpProxy(natsUrl);
      const seen: number[] = [];
      const { consumer, stop } = await consumerOn(proxy.url, iso.names.eventsStream, {
        everyMs,
        idleHeartbeatMs: 200,
        expiresMs: 1_000,
        onMessage: acking((m) => seen.push(m.seq)),
      });
      try {
        const js = jetstream(nc);
        await js.publish(eventSubject(iso.names, 'team', 'reservation.created'), '{}');
        await waitFor(() => seen.length === 1, { what: 'the first message' });
        // Idle but healthy: heartbeats arrive, so nothing restarts (a period, not a wait for a state).
        await new Promise((r) => setTimeout(r, 1_200));
        expect(consumer.restarts).toBe(0);

        proxy.stall();
        await waitFor(() => consumer.restarts >= 1, { timeoutMs: 10_000, what: 'a restart' });
        proxy.resume();
        await js.publish(eventSubject(iso.names, 'team', 'reservation.settled'), '{}');
        await waitFor(() => seen.includes(2), { timeoutMs: 20_000, what: 'the message after' });
        expect(consumer.consuming).toBe(true);
      } finally {
        await stop();
        await proxy.close();
      }
    });

    test('a nak with delay, by the handler or after it threw, brings the message back after the delay and not before', async ({
      nc,
      natsUrl,
      iso,
    }) => {
      await ensureEventsStream(await jetstreamManager(nc), iso.names);
      const deliveries: { seq: number; count: number; at: number }[] = [];
      const { stop } = await consumerOn(natsUrl, iso.names.eventsStream, {
        everyMs,
        onMessage: (m: JsMsg) => {
          deliveries.push({ seq: m.seq, count: m.info.deliveryCount, at: Date.now() });
          if (m.info.deliveryCount > 1) return void m.ack();
          // Message 1: a transient failure the handler knows about. Message 2: a handler that throws.
          if (m.seq === 1) return void nakLater(m, { initialMs: 800, maxMs: 800 });
          return Promise.reject(new Error('handler bug'));
        },
      });
      try {
        const js = jetstream(nc);
        await js.publish(eventSubject(iso.names, 'team', 'reservation.created'), '{}');
        await js.publish(eventSubject(iso.names, 'team', 'reservation.settled'), '{}');
        await waitFor(() => deliveries.filter((d) => d.count === 2).length === 2, {
          what: 'both messages redelivered',
        });
        for (const seq of [1, 2]) {
          const [first, second] = deliveries.filter((d) => d.seq === seq);
          expect(second!.count).toBe(2);
          expect(second!.at - first!.at).toBeGreaterThanOrEqual(700);
        }
      } finally {
        await stop();
      }
    });

    test('a handler slower than the ack wait keeps its message with working(): delivered once', async ({
      nc,
      natsUrl,
      iso,
    }) => {
      const jsm = await jetstreamManager(nc);
      await ensureEventsStream(jsm, iso.names);
      const counts: number[] = [];
      const { stop } = await consumerOn(natsUrl, iso.names.eventsStream, {
        everyMs,
        durable: { durable_name: 'test', ack_wait: nanos(1_000) },
        concurrency: 4,
        onMessage: async (m) => {
          counts.push(m.info.deliveryCount);
          await new Promise((r) => setTimeout(r, 2_500));
          m.ack();
        },
      });
      try {
        await jetstream(nc).publish(eventSubject(iso.names, 'team', 'reservation.created'), '{}');
        await waitFor(() => counts.length > 0, { what: 'the message delivered' });
        await waitFor(
          async () =>
            (await jsm.consumers.info(iso.names.eventsStream, 'test')).num_ack_pending === 0,
          { timeoutMs: 10_000, what: 'the slow message acked' },
        );
        expect(counts).toEqual([1]);
        expect((await jsm.consumers.info(iso.names.eventsStream, 'test')).num_redelivered).toBe(0);
      } finally {
        await stop();
      }
    });
  });
}
