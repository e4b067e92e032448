import { allEventsSubject, type NatsNames } from '@holdfast/events';
import type { RetryPolicy } from '@holdfast/retry';
import { DurableConsumer, ensureDurable, type DurableConfig, type Logger } from '@holdfast/runtime';
import {
  DeliverPolicy,
  ReplayPolicy,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import { nanos, type NatsConnection } from '@nats-io/transport-node';

export interface ConsumerSettings {
  durable: string;
  fetchSize: number;
  /** Pull in bursts this often (ms); 0 or absent: consume(). */
  pullEveryMs?: number;
  maxAckPending: number;
  ackWaitMs: number;
}

/** Redelivery after a failed insert (or a dead letter not stored): 500 ms doubling to 10 s. */
export const REDELIVER: RetryPolicy = { initialMs: 500, maxMs: 10_000 };

/** Every event from the first, each replica taking its share of the one durable. */
function durableConfig(names: NatsNames, s: ConsumerSettings): DurableConfig {
  return {
    durable_name: s.durable,
    deliver_policy: DeliverPolicy.All,
    replay_policy: ReplayPolicy.Instant,
    filter_subject: allEventsSubject(names),
    ack_wait: nanos(s.ackWaitMs),
    max_ack_pending: s.maxAckPending,
  };
}

/** Creates the durable, or brings one an older release left to these limits. */
export async function ensureConsumer(
  jsm: JetStreamManager,
  names: NatsNames,
  s: ConsumerSettings,
): Promise<void> {
  await ensureDurable(jsm, names.eventsStream, durableConfig(names, s));
}

/**
 * The aggregator's consume loop: one message at a time into the batcher, whose returned
 * promise (a full batch waiting for the previous insert) stops the pulling. In bursts every
 * `pullEveryMs` (the batch waits seconds anyway). Restarts after 4 missed heartbeats (20 s of
 * silence), 250 ms doubling to 5 s apart.
 */
export function createEventConsumer(opts: {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  names: NatsNames;
  settings: ConsumerSettings;
  logger: Logger;
  onMessage: (msg: JsMsg) => Promise<void> | undefined;
  /** The messages the batcher holds (filling, waiting, inserting): kept alive while held. */
  held: (minAgeMs: number) => Iterable<JsMsg>;
}): DurableConsumer {
  return new DurableConsumer({
    nc: opts.nc,
    js: opts.js,
    jsm: opts.jsm,
    stream: opts.names.eventsStream,
    durable: durableConfig(opts.names, opts.settings),
    pullSize: opts.settings.fetchSize,
    ...(opts.settings.pullEveryMs ? { bursts: { everyMs: opts.settings.pullEveryMs } } : {}),
    onMessage: opts.onMessage,
    held: opts.held,
    restart: { initialMs: 250, maxMs: 5_000 },
    redeliver: REDELIVER,
    maxMissedHeartbeats: 4,
    logger: opts.logger,
  });
}
