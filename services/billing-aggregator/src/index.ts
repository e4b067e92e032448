export { loadConfig } from './env.js';
export { migrate } from './migrate.js';
export { createClickHouse, type SqlExecutor } from './clickhouse.js';
export { runAudit } from './audit.js';
export { sql, qualified, raw } from './sql.js';
export { startAggregator, type Aggregator } from './service.js';
