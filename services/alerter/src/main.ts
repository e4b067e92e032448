import { natsNamesToEnv } from '@holdfast/config';
import {
  createLogger,
  createRegistry,
  handleShutdown,
  startOpsServer,
  type Stoppable,
} from '@holdfast/runtime';
import { loadConfig } from './env.js';
import { start } from './service.js';

/** The process: env -> start (may wait for the authority) -> ops server -> shutdown -> ready. */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger({ name: 'alerter', level: config.logLevel });
  const registry = createRegistry('alerter');
  // The shutdown path exists from the start: a signal during the config wait aborts it and
  // lets the parts already started stop before the process exits.
  const starting = new AbortController();
  const pending = start(config, { logger, registry, signal: starting.signal });
  const parts: Stoppable[] = [
    {
      name: 'start',
      stop: async () => {
        starting.abort(new Error('stopped while starting'));
        await pending.catch(() => undefined);
      },
    },
  ];
  handleShutdown(logger, parts, 30_000);
  const service = await pending.catch((err: unknown) => {
    if (starting.signal.aborted) return undefined; // handleShutdown exits once start has unwound
    throw err;
  });
  if (!service) return;
  const ops = await startOpsServer({
    port: config.opsPort,
    logger,
    registry,
    checks: service.checks,
  });
  parts.push({ name: 'alerter', stop: () => service.stop() }, { name: 'ops', stop: ops.stop });
  logger.info({ names: natsNamesToEnv(config.nats.names), opsPort: ops.port }, 'ready');
}

main().catch((err: unknown) => {
  const logger = createLogger({ name: 'alerter' });
  logger.fatal({ err }, 'alerter failed to start');
  process.exit(1);
});
