import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type ConsumerConfig,
  type ConsumerInfo,
  type JetStreamManager,
} from '@nats-io/jetstream';

/** A durable pull consumer's config; what is left out gets the defaults of `ensureDurable`. */
export type DurableConfig = Partial<ConsumerConfig> & { durable_name: string };

/** The settings an existing consumer can be brought to; the others are fixed at creation. */
const MUTABLE = ['ack_wait', 'max_ack_pending', 'max_deliver', 'description'] as const;

/**
 * Creates the durable, or brings an existing one to `config`'s mutable settings (ack wait,
 * max ack pending, max deliver), so a new release's limits apply to a consumer an older one
 * left. Every replica calls it at start and on every re-consume (a deleted consumer comes
 * back); creating the same config twice is a no-op on the server.
 * Defaults: explicit acks, every message from the start, `max_deliver: -1` (a message is
 * never dropped for being redelivered often, e.g. through a long outage; a poison message is
 * terminated explicitly, with a dead letter).
 */
export async function ensureDurable(
  jsm: JetStreamManager,
  stream: string,
  config: DurableConfig,
): Promise<ConsumerInfo> {
  const wanted: DurableConfig = {
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    max_deliver: -1,
    ...config,
  };
  let info: ConsumerInfo;
  try {
    info = await jsm.consumers.info(stream, config.durable_name);
  } catch (err) {
    if (!(err instanceof JetStreamApiError) || err.code !== JetStreamApiCodes.ConsumerNotFound) {
      throw err;
    }
    return jsm.consumers.add(stream, wanted);
  }
  const changes: Partial<Pick<ConsumerConfig, (typeof MUTABLE)[number]>> = {};
  for (const key of MUTABLE) {
    const value = wanted[key];
    if (value !== undefined && info.config[key] !== value) Object.assign(changes, { [key]: value });
  }
  if (Object.keys(changes).length === 0) return info;
  return jsm.consumers.update(stream, config.durable_name, changes);
}
