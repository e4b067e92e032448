import { createLogger, handleShutdown } from '@holdfast/runtime';
import { loadConfig } from './config.js';
import { startAggregator } from './index.js';

/** Composition root: config -> start -> one shutdown path -> ready. */
const config = loadConfig();
const logger = createLogger({ name: 'billing-aggregator', level: config.logLevel });
try {
  const aggregator = await startAggregator({ config, logger });
  handleShutdown(logger, [{ name: 'aggregator', stop: () => aggregator.stop() }], 30_000);
  logger.info(
    {
      opsPort: aggregator.opsPort,
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
