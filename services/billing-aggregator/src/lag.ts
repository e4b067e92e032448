import type { JetStreamManager } from '@nats-io/jetstream';
import type { Logger } from '@holdfast/runtime';
import type { AggregatorMetrics } from './metrics.js';

/** Polls the durable consumer's info for the lag gauges. */
export function startLagPoller(opts: {
  jsm: JetStreamManager;
  stream: string;
  durable: string;
  metrics: AggregatorMetrics;
  logger: Logger;
  intervalMs?: number;
}): { stop: () => void } {
  const timer = setInterval(() => {
    opts.jsm.consumers
      .info(opts.stream, opts.durable)
      .then((info) => {
        opts.metrics.consumerPending.set(info.num_pending);
        opts.metrics.consumerAckPending.set(info.num_ack_pending);
      })
      .catch((err: unknown) => opts.logger.debug({ err }, 'consumer info failed'));
  }, opts.intervalMs ?? 5_000);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
