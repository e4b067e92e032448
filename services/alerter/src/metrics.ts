import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** Webhook delivery outcomes, as logged and counted. */
export const DELIVERY_OUTCOMES = ['delivered', 'failed', 'dead_lettered', 'dropped'] as const;

export interface AlerterMetrics {
  events: Counter<'type' | 'result'>;
  crossings: Counter<'hard'>;
  projections: Counter;
  deliveries: Counter<'outcome'>;
  /** From the event's time (the crossing) to the receiver's 2xx. */
  deliveryLatency: Histogram;
  /** Jobs waiting on this replica for a turn of their webhook (ALERTER_WEBHOOK_CONCURRENCY_PER_HOOK). */
  webhookJobsWaiting: Gauge<'webhook'>;
  /** Delivered jobs purged from the webhook queue (webhook/purge.ts). */
  webhookJobsPurged: Counter<'webhook'>;
  suspensions: Counter<'action'>;
  /** Burn samples merged into the shared state, then projections checked (per window). */
  burnFlushes: Counter<'stage'>;
  usagePolls: Counter<'result'>;
  configReloads: Counter<'result'>;
}

export function createMetrics(registry: Registry): AlerterMetrics {
  return {
    events: new Counter({
      name: 'holdfast_alerter_events_total',
      help: 'Events handled, by type and result (ok, retry, poison).',
      labelNames: ['type', 'result'],
      registers: [registry],
    }),
    crossings: new Counter({
      name: 'holdfast_alerter_threshold_crossings_total',
      help: 'Threshold levels reached upward (hard="true": 100% of an enforced budget).',
      labelNames: ['hard'],
      registers: [registry],
    }),
    projections: new Counter({
      name: 'holdfast_alerter_exhaustion_projections_total',
      help: 'budget.exhaustion_projected warnings fired.',
      registers: [registry],
    }),
    deliveries: new Counter({
      name: 'holdfast_alerter_webhook_deliveries_total',
      help: 'Webhook delivery attempts by outcome.',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    deliveryLatency: new Histogram({
      name: 'holdfast_alerter_webhook_delivery_latency_seconds',
      help: 'From the event (the crossing) to a 2xx from the receiver.',
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3_600],
      registers: [registry],
    }),
    webhookJobsWaiting: new Gauge({
      name: 'holdfast_alerter_webhook_jobs_waiting',
      help: "Webhook jobs queued behind the one this replica last took of the webhook's consumer (JetStream's pending count), by webhook: one that stays high names a receiver that is slow, hung or failing.",
      labelNames: ['webhook'],
      registers: [registry],
    }),
    webhookJobsPurged: new Counter({
      name: 'holdfast_alerter_webhook_jobs_purged_total',
      help: "Webhook jobs purged from the queue once the webhook's consumer acked them (up to its ack floor), by webhook.",
      labelNames: ['webhook'],
      registers: [registry],
    }),
    suspensions: new Counter({
      name: 'holdfast_alerter_suspension_requests_total',
      help: 'Suspend and resume requests sent to the authority.',
      labelNames: ['action'],
      registers: [registry],
    }),
    burnFlushes: new Counter({
      name: 'holdfast_alerter_burn_flushes_total',
      help: 'Per window: burn samples merged (stage="merged"), then the projection checked (stage="checked").',
      labelNames: ['stage'],
      registers: [registry],
    }),
    usagePolls: new Counter({
      name: 'holdfast_alerter_usage_polls_total',
      help: 'Reads of the authority usage (to resume tenants whose window freed room), by result.',
      labelNames: ['result'],
      registers: [registry],
    }),
    configReloads: new Counter({
      name: 'holdfast_alerter_config_reloads_total',
      help: 'Reads of the authority config after a config.changed event or notice, by result.',
      labelNames: ['result'],
      registers: [registry],
    }),
  };
}
