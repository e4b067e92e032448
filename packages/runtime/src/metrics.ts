import { collectDefaultMetrics, Registry } from 'prom-client';

/**
 * How often the event-loop delay histogram (`nodejs_eventloop_lag_*`) samples, ms. Each sample
 * is a timer that wakes the process: prom-client's default of 10 ms was 100 wake-ups a second
 * in every service, the largest part of an idle stack's CPU (issue 14). A stall of 100 ms or
 * more is still always seen; shorter ones in proportion to their length.
 */
const EVENT_LOOP_SAMPLE_MS = 100;

/** A registry with Node's default metrics, labelled with the service name. */
export function createRegistry(service: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  return registry;
}

/** Latency buckets in seconds, from 100 µs to 10 s. */
export const LATENCY_BUCKETS = [
  0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];
