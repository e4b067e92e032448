export * from './ports.js';
export * from './wait-for.js';
export * from './local-servers.js';
export * from './resolve-infra.js';
export * from './fixtures.js';
export * from './child.js';
export type { ClickHouseClient } from '@clickhouse/client';
export type { NatsConnection } from '@nats-io/transport-node';
export type { Redis } from 'ioredis';
