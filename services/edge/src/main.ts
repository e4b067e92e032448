import { createLogger, handleShutdown } from '@holdfast/runtime';
import { loadConfig } from './env.js';
import { start } from './service.js';

/**
 * The process: config -> start -> one shutdown path -> ready. No separate ops server: the
 * edge serves /healthz, /readyz and /metrics on its API port (plugins/observability.ts).
 */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger({ name: 'edge', level: config.logLevel });
  const service = await start(config, { logger, warmPool: ['o200k_base'] });
  // The outer deadline covers the parts' own (http, then nats, 15 s each).
  handleShutdown(logger, [{ name: 'edge', stop: () => service.stop() }], 30_000);
  logger.info({ port: service.port, configVersion: service.app.configSnapshot.version }, 'ready');
}

main().catch((err: unknown) => {
  // The logger may not exist yet: write one JSON line like pino would.
  process.stderr.write(
    `${JSON.stringify({ level: 60, msg: 'failed to start', err: String(err) })}\n`,
  );
  process.exit(1);
});
