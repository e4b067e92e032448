import { closeSubject, closesStream, type DeferredClose } from '@holdfast/events';
import { infraTest as test, waitFor } from '@holdfast/testkit';
import { jetstream, jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { expect } from 'vitest';
import { CLOSES_DURABLE } from '../src/closes-consumer.js';
import { admissionOf, miniCall, onPrivateRedis, readEvents } from './harness.js';

/**
 * On nats-server 2.9.10 the closes work queue can keep closes its consumer acked, below the
 * consumer's ack floor, after a node's kill (closes.nats-kill.int.test.ts). Here a closes
 * stream with limits retention (kept as an operator made it: ensureClosesStream changes no
 * existing stream's retention) keeps every acked close the same way, so that state is there
 * each time, without a kill.
 */
test('closes the stream kept after they were acked are purged up to the ack floor; a close Redis cannot take yet stays and is applied once', async ({
  nc,
  natsUrl,
  iso,
}) => {
  const jsm = await jetstreamManager(nc);
  const stream = closesStream(iso.names).name;
  await jsm.streams.add({
    ...closesStream(iso.names),
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
  });
  const { server, h, admin } = await onPrivateRedis(
    { nc, natsUrl, iso },
    { closesPurgeEveryMs: 200 },
  );
  try {
    const js = jetstream(nc);
    const defer = async () => {
      const call = miniCall(10, 10);
      const { reservationId } = call;
      const admitted = admissionOf(await h.client.admit(call));
      return async () => {
        const close: DeferredClose = {
          op: 'settle',
          request: {
            reservationId,
            tenant: 'support-bot',
            org: admitted.org,
            usage: { promptTokens: 10, completionTokens: 5 },
            outcome: 'completed',
          },
        };
        await js.publish(closeSubject(iso.names, admitted.org!), JSON.stringify(close), {
          msgID: `close-${reservationId}`,
        });
      };
    };
    const closes = [await defer(), await defer(), await defer()];
    const counts = async () => {
      const out: Record<string, number> = {};
      for (const v of (await h.authority.ctx.metrics.closes.get()).values) {
        out[String(v.labels.status)] = (out[String(v.labels.status)] ?? 0) + v.value;
      }
      return out;
    };
    const stored = async () => (await jsm.streams.info(stream)).state.messages;

    // Two closes applied and acked: the stream keeps them until the purge.
    await closes[0]!();
    await closes[1]!();
    await waitFor(async () => (await counts()).settled === 2 && (await stored()) === 0, {
      timeoutMs: 5_000,
      what: 'two closes applied, then purged',
    });

    // Redis hangs: the third close is refused (budget_store_unavailable) and nak'd, and stays.
    await admin.call('CLIENT', 'PAUSE', '2500', 'ALL');
    await closes[2]!();
    await waitFor(
      async () => (await jsm.consumers.info(stream, CLOSES_DURABLE)).num_ack_pending === 1,
      { timeoutMs: 2_000, what: 'the third close delivered' },
    );
    expect(await stored()).toBe(1);
    // The script Redis held runs once it wakes; the redelivery finds the close settled.
    await waitFor(
      async () => {
        const c = await jsm.consumers.info(stream, CLOSES_DURABLE);
        return c.num_pending + c.num_ack_pending === 0 && (await stored()) === 0;
      },
      { timeoutMs: 10_000, what: 'the third close applied once Redis is back, then purged' },
    );
    expect(await counts()).toEqual({ settled: 2, already_settled: 1 });
    // Each applied once: one reservation.settled each (relayed from the outbox).
    const settledEvents = async () =>
      (await readEvents(nc, iso.names)).filter((e) => e.type === 'reservation.settled');
    await waitFor(async () => (await settledEvents()).length >= 3, {
      timeoutMs: 5_000,
      what: 'three reservation.settled events',
    });
    expect(new Set((await settledEvents()).map((e) => e.id)).size).toBe(3);
    expect(await settledEvents()).toHaveLength(3);
    const purged = (await h.authority.ctx.metrics.closesPurged.get()).values[0]?.value;
    expect(purged).toBe(3);
  } finally {
    admin.disconnect();
    await h.stop();
    await jsm.streams.delete(stream).catch(() => undefined);
    await server.stop();
  }
});
