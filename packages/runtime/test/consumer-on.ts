import { waitFor } from '@holdfast/testkit';
import { jetstream, jetstreamManager, type JsMsg } from '@nats-io/jetstream';
import { connect, nanos, type NatsConnection } from '@nats-io/transport-node';
import { DurableConsumer, type DurableConsumerOptions } from '../src/jetstream/consumer.js';
import { createLogger } from '../src/logger.js';

const logger = createLogger({
  name: 'consumer-test',
  level: process.env.TEST_LOG_LEVEL ?? 'silent',
});

/** The two loops every shared test runs on: consume() and burst pulls (50 ms apart). */
export const MODES = [
  { mode: 'consume()', everyMs: undefined },
  { mode: 'bursts', everyMs: 50 },
] as const;

export type ConsumerSetup = Pick<DurableConsumerOptions, 'onMessage'> &
  Partial<DurableConsumerOptions> & {
    /** Pull in bursts this often, on the helper's own connection. */
    everyMs?: number;
  };

/**
 * A started `DurableConsumer` named `test` on `stream`, on a connection of its own that
 * reconnects forever (as the services' do), once it is consuming.
 */
export async function consumerOn(
  natsUrl: string,
  stream: string,
  { everyMs, ...setup }: ConsumerSetup,
): Promise<{ consumer: DurableConsumer; nc: NatsConnection; stop: () => Promise<void> }> {
  const nc = await connect({ servers: natsUrl, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  const consumer = new DurableConsumer({
    nc,
    js: jetstream(nc),
    jsm: await jetstreamManager(nc),
    stream,
    durable: { durable_name: 'test', ack_wait: nanos(30_000) },
    pullSize: 10,
    restart: { initialMs: 50, maxMs: 200 },
    redeliver: { initialMs: 800, maxMs: 800, factor: 1 },
    maxMissedHeartbeats: 3,
    logger,
    ...(everyMs === undefined ? {} : { bursts: { everyMs } }),
    ...setup,
  });
  await consumer.start();
  await waitFor(() => consumer.consuming, { what: 'consuming' });
  return {
    consumer,
    nc,
    stop: async () => {
      await consumer.stop();
      await nc.close();
    },
  };
}

/** A handler that notes each message, acks it and takes the next at once. */
export function acking(note: (m: JsMsg) => unknown): DurableConsumerOptions['onMessage'] {
  return (m) => {
    note(m);
    m.ack();
    return undefined;
  };
}
