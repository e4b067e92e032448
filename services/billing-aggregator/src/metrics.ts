import { LATENCY_BUCKETS } from '@holdfast/runtime';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export type AggregatorMetrics = ReturnType<typeof createMetrics>;

/** The aggregator's Prometheus metrics (names prefixed `holdfast_aggregator_`). */
export function createMetrics(registry: Registry) {
  const registers = [registry];
  return {
    batchSize: new Histogram({
      name: 'holdfast_aggregator_batch_size',
      help: 'Events per ClickHouse insert',
      buckets: [1, 10, 100, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000],
      registers,
    }),
    flushSeconds: new Histogram({
      name: 'holdfast_aggregator_flush_seconds',
      help: 'Time from cutting a batch to its acks, seconds (insert included)',
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    events: new Counter({
      name: 'holdfast_aggregator_events_total',
      help: 'Messages handled, by outcome: inserted, duplicate_in_batch, dead_lettered, nacked',
      labelNames: ['outcome'] as const,
      registers,
    }),
    flushFailures: new Counter({
      name: 'holdfast_aggregator_flush_failures_total',
      help: 'Batches that ClickHouse did not take (naked for redelivery)',
      registers,
    }),
    consumerPending: new Gauge({
      name: 'holdfast_aggregator_consumer_pending',
      help: 'Lag: messages in the stream not yet delivered to the durable consumer',
      registers,
    }),
    consumerAckPending: new Gauge({
      name: 'holdfast_aggregator_consumer_ack_pending',
      help: 'Messages delivered but not yet acked (all replicas)',
      registers,
    }),
    eventLagSeconds: new Gauge({
      name: 'holdfast_aggregator_event_lag_seconds',
      help: 'Age of the newest event in the last flushed batch when its insert was confirmed',
      registers,
    }),
    clickhouseUp: new Gauge({
      name: 'holdfast_aggregator_clickhouse_up',
      help: '1 when the last insert or ping succeeded',
      registers,
    }),
    auditDrift: new Gauge({
      name: 'holdfast_aggregator_audit_drift',
      help: 'Largest absolute drift of the last audit (tokens or micro-USD), by unit',
      labelNames: ['unit'] as const,
      registers,
    }),
    audits: new Counter({
      name: 'holdfast_aggregator_audits_total',
      help: 'Drift audits run, by result: ok, drift, drift_repeated (drift in consecutive runs), failed',
      labelNames: ['result'] as const,
      registers,
    }),
  };
}
