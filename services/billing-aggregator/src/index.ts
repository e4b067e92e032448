export { loadConfig, type AggregatorConfig } from './config.js';
export { migrate, loadMigrations, render } from './migrate.js';
export { createClickHouse, type SqlExecutor } from './clickhouse.js';
export { runAudit, compare, exceeds, type AuditReport, type DriftRow } from './audit.js';
export { toEventRow, EventRow } from './rows.js';
export { sql, lit, ident, qualified, raw, tuple, Sql, SqlError } from './sql.js';
export { CONSUMER_NAME } from './sink.js';

export {
  start,
  startAggregator,
  type Aggregator,
  type AggregatorDeps,
  type AggregatorOptions,
} from './service.js';
