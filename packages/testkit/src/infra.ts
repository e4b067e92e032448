/** The parts of the testkit that do not need vitest (benchmarks and scripts import these). */
export * from './ports.js';
export * from './wait-for.js';
export * from './local-servers.js';
export * from './resolve-infra.js';
export * from './child.js';
export * from './bench.js';
export * from './redis-cluster.js';
export * from './nats-cluster.js';
