import { eventSubject } from '@holdfast/events';
import { infraTest as test, tcpProxy } from '@holdfast/testkit';
import {
  AckPolicy,
  jetstream,
  jetstreamManager,
  type Consumer,
  type JsMsg,
} from '@nats-io/jetstream';
import { connect, nanos } from '@nats-io/transport-node';
import { expect } from 'vitest';
import { ensureEventsStream } from '../nats.js';
import { nakConfirmed } from './messages.js';

const NAK_DELAY_MS = 200;

async function delivery(consumer: Consumer): Promise<JsMsg> {
  const m = await consumer.next({ expires: 5_000 });
  if (!m) throw new Error('no delivery within 5 s');
  return m;
}

/**
 * Seen under load (webhook.queue-retention: a failing webhook's 3 jobs delivered 4 times once
 * it recovered): a nak whose answer was late (a loaded box) was sent again, and nats-server 2.9
 * applies a nak of an earlier delivery to the message's current one (`processNak` checks only
 * that the sequence is pending). The resend arrived after the first nak's delay, when another
 * replica held the next delivery, and handed that one back too: a third delivery while the
 * second was in flight, two POSTs of one job at once.
 */
test("a nak whose answer comes late is not sent again: the message's next delivery, in flight at another replica, is not handed back with it", async ({
  nc,
  natsUrl,
  iso,
}) => {
  const jsm = await jetstreamManager(nc);
  await ensureEventsStream(jsm, iso.names);
  await jsm.consumers.add(iso.names.eventsStream, {
    durable_name: 'naks',
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(30_000),
  });
  await jetstream(nc).publish(eventSubject(iso.names, 'team', 'reservation.created'), '{}');
  // Replica A behind a network that holds what the server sends (its nak's answer among it).
  const proxy = await tcpProxy(natsUrl);
  const slow = await connect({ servers: proxy.url, name: 'replica-a' });
  try {
    const a = await jetstream(slow).consumers.get(iso.names.eventsStream, 'naks');
    const first = await delivery(a);
    expect(first.info.deliveryCount).toBe(1);
    proxy.stall();
    const confirmed = nakConfirmed(first, NAK_DELAY_MS);
    // Replica B takes the redelivery after the delay and holds it (an attempt in flight).
    const b = await jetstream(nc).consumers.get(iso.names.eventsStream, 'naks');
    const second = await delivery(b);
    expect(second.info.deliveryCount).toBe(2);
    // Longer than A waits for its nak's answer (1 s), and its delay after: no third delivery.
    const third = await b.next({ expires: 3_000 });
    expect(third?.info.deliveryCount, 'handed back while in flight').toBeUndefined();
    proxy.resume();
    second.ack();
    // Without an answer in time, the nak is not known to be taken.
    expect(await confirmed).toBe(false);
  } finally {
    await slow.close();
    await proxy.close();
  }
});
