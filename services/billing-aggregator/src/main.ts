import { createLogger, createRegistry, handleShutdown, startOpsServer } from '@holdfast/runtime';
import { loadConfig } from './env.js';
import { start } from './service.js';

/** The process: config -> start -> ops server -> one shutdown path -> ready. */
const config = loadConfig();
const logger = createLogger({ name: 'billing-aggregator', level: config.logLevel });
try {
  const registry = createRegistry('billing-aggregator');
  const service = await start(config, { logger, registry });
  const ops = await startOpsServer({
    port: config.opsPort,
    logger,
    registry,
    checks: service.checks,
  });
  handleShutdown(
    logger,
    [
      { name: 'aggregator', stop: () => service.stop() },
      { name: 'ops', stop: ops.stop },
    ],
    30_000,
  );
  logger.info(
    {
      opsPort: ops.port,
      database: config.clickhouse.database,
      stream: config.nats.names.eventsStream,
      durable: config.consumer.durable,
      batch: config.batch,
    },
    'ready',
  );
} catch (err) {
  logger.fatal({ err }, 'billing-aggregator failed to start');
  process.exitCode = 1;
}
