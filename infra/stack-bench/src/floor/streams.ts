import {
  AckPolicy,
  DeliverPolicy,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
} from '@nats-io/jetstream';
import { nanos, type NatsConnection } from '@nats-io/transport-node';
import { NAMES } from './protocol.js';

/** The floor's events stream, as the services' (file storage, a 10-minute duplicate window). */
export async function ensureStream(nc: NatsConnection): Promise<void> {
  const jsm = await jetstreamManager(nc);
  const config = {
    name: NAMES.stream,
    subjects: [`${NAMES.events}.>`],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    duplicate_window: nanos(10 * 60_000),
    num_replicas: 1,
  };
  await jsm.streams.add(config).catch(() => jsm.streams.update(NAMES.stream, config));
}

/** A durable pull consumer of every event, acked one by one (as the services'). */
export async function ensureConsumer(
  nc: NatsConnection,
  durable: string,
  maxAckPending: number,
): Promise<void> {
  const jsm = await jetstreamManager(nc);
  await jsm.consumers.add(NAMES.stream, {
    durable_name: durable,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: nanos(30_000),
    max_ack_pending: maxAckPending,
  });
}
