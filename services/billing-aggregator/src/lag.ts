import type { JetStreamManager } from '@nats-io/jetstream';
import { every, type Logger, type Periodic } from '@holdfast/runtime';
import type { AggregatorMetrics } from './metrics.js';

/** Polls the durable consumer's info for the lag gauges. */
export function startLagPoller(opts: {
  jsm: JetStreamManager;
  stream: string;
  durable: string;
  metrics: AggregatorMetrics;
  logger: Logger;
  intervalMs?: number;
}): Periodic {
  const poll = async () => {
    const info = await opts.jsm.consumers.info(opts.stream, opts.durable);
    opts.metrics.consumerPending.set(info.num_pending);
    opts.metrics.consumerAckPending.set(info.num_ack_pending);
  };
  // Debug: NATS being away is logged by the consumer itself.
  return every(opts.intervalMs ?? 5_000, poll, {
    logger: opts.logger,
    failed: 'consumer info failed',
    level: 'debug',
  });
}
