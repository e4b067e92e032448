import { eventSubject } from '@holdfast/events';
import { isolation } from '@holdfast/testkit';
import {
  AckPolicy,
  jetstream,
  jetstreamManager,
  type Consumer,
  type JsMsg,
} from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { expect, test } from 'vitest';
import { natsClusterForFile } from '../../test/nats-cluster.js';
import { createLogger } from '../logger.js';
import { connectNats, ensureEventsStream } from '../nats.js';
import { nakLater } from './messages.js';

const { cluster: theCluster, connect } = natsClusterForFile((servers) =>
  connectNats({
    servers,
    name: 'nak-cluster-test',
    logger: createLogger({ name: 'nak-cluster-test', level: 'silent' }),
  }),
);

/** The next delivery, through the errors and empty pulls of an election. */
async function nextDelivery(consumer: Consumer, deadline: number): Promise<JsMsg> {
  while (Date.now() < deadline) {
    try {
      const m = await consumer.next({ expires: 1_000 });
      if (m) return m;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error('no redelivery before the deadline');
}

const ACK_WAIT_MS = 30_000;
const NAK_DELAY_MS = 500;

test('a nak sent while its consumer has no leader (the leader just killed) brings the message back after the election and the delay, not after the ack wait', async () => {
  const cluster = theCluster();
  const nc = await connect(cluster.url);
  const jsm = await jetstreamManager(nc);
  const { names } = isolation();
  await ensureEventsStream(jsm, names, { replicas: 3 });
  await jsm.consumers.add(names.eventsStream, {
    durable_name: 'naks',
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(ACK_WAIT_MS),
  });
  await jetstream(nc).publish(eventSubject(names, 'team', 'reservation.created'), '{}');
  const leader = (await jsm.consumers.info(names.eventsStream, 'naks')).cluster?.leader;
  const victim = cluster.nodes.findIndex((n) => n.name === leader);
  expect(victim).toBeGreaterThanOrEqual(0);
  // The handler's connection is to the nodes that stay: what is measured is the consumer's
  // election, not a reconnect.
  const others = cluster.nodes.filter((_, i) => i !== victim).map((n) => n.url);
  const hnc = await connect(others.join(','));
  const consumer = await jetstream(hnc).consumers.get(names.eventsStream, 'naks');
  const hjsm = await jetstreamManager(hnc, { timeout: 500 });
  const first = await nextDelivery(consumer, Date.now() + 10_000);
  expect(first.info.deliveryCount).toBe(1);
  // A handler at work for a moment (as the alerter's, timed out after 2 s): the delivery is
  // replicated to the followers, so the new leader knows it (killed at once, it may not, and
  // delivers the message as new).
  await new Promise((r) => setTimeout(r, 1_000));

  await cluster.kill(victim);
  const nakAt = Date.now();
  nakLater(first, { initialMs: NAK_DELAY_MS, maxMs: NAK_DELAY_MS }, ACK_WAIT_MS);
  // When a new leader is known (what the nak has to wait for anyway).
  let electedMs: number | undefined;
  void (async () => {
    while (electedMs === undefined && Date.now() < nakAt + ACK_WAIT_MS) {
      const info = await hjsm.consumers.info(names.eventsStream, 'naks').catch(() => undefined);
      if (info?.cluster?.leader && info.cluster.leader !== leader) electedMs = Date.now() - nakAt;
      else await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const again = await nextDelivery(consumer, nakAt + ACK_WAIT_MS + 15_000);
  const backMs = Date.now() - nakAt;
  console.log(
    `nak at a leader kill: new leader after ${electedMs} ms, message back after ${backMs} ms`,
  );
  expect(again.seq).toBe(first.seq);
  expect(again.info.deliveryCount).toBe(2);
  again.ack();
  // The election (4-10 s on nats-server 2.9) and the nak's delay, not the 30 s ack wait: the nak
  // is sent again until the new leader takes it. The message back means a leader was elected by
  // then: the info poll may not have seen it yet (the stream's meta leader can be the one killed,
  // and its own election answers the poll later), so the message's return bounds the election.
  const elected = electedMs ?? backMs;
  expect(backMs).toBeLessThan(elected + NAK_DELAY_MS + 2_500);
  expect(backMs).toBeLessThan(ACK_WAIT_MS * 0.6);
  await cluster.restart(victim);
}, 90_000);
