import { natsNamesToEnv } from '@holdfast/config';
import { retry, type RetryPolicy } from '@holdfast/retry';
import {
  AuthorityClient,
  connectNats,
  createLogger,
  createRegistry,
  errorMessage,
  handleShutdown,
  startOpsServer,
} from '@holdfast/runtime';
import { startAlerter } from './alerter.js';
import { loadConfig } from './config.js';
import { loadHoldfastConfig } from './holdfast-config.js';

/** Asks for the authority's config every second for a minute at start (it may start after us). */
const CONFIG_WAIT: RetryPolicy = { initialMs: 1_000, maxMs: 1_000, factor: 1, retryForMs: 60_000 };

/** Composition root: env -> NATS -> config -> alerter -> ops server -> shutdown -> ready. */
async function main(): Promise<void> {
  const { env, nats, logLevel, opsPort, settings } = loadConfig();
  const logger = createLogger({ name: 'alerter', level: logLevel });
  const { names } = nats;
  const nc = await connectNats({ servers: nats.servers, name: 'holdfast-alerter', logger });
  const authority = new AuthorityClient({ nc, names });

  const config = await retry(() => loadHoldfastConfig({ path: env.HOLDFAST_CONFIG, authority }), {
    policy: CONFIG_WAIT,
    // A bad file never gets better; an authority that is not up yet may.
    retryable: () => env.HOLDFAST_CONFIG === undefined,
    onRetry: ({ outcome }) => {
      if (!outcome.ok) {
        logger.warn({ err: errorMessage(outcome.error) }, 'waiting for the authority config');
      }
    },
  });

  const registry = createRegistry('alerter');
  const alerter = await startAlerter({
    nc,
    names,
    config,
    configFromAuthority: env.HOLDFAST_CONFIG === undefined,
    logger,
    registry,
    settings,
  });
  const ops = await startOpsServer({
    port: opsPort,
    logger,
    registry,
    checks: alerter.checks,
  });
  // Stopped in reverse: the ops server, then the alerter, then NATS.
  handleShutdown(logger, [
    { name: 'nats', stop: () => nc.drain() },
    { name: 'alerter', stop: () => alerter.stop() },
    { name: 'ops', stop: () => ops.stop() },
  ]);
  logger.info({ names: natsNamesToEnv(names), opsPort: ops.port }, 'ready');
}

main().catch((err: unknown) => {
  const logger = createLogger({ name: 'alerter' });
  logger.fatal({ err }, 'alerter failed to start');
  process.exit(1);
});
