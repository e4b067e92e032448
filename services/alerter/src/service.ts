import { retry, type RetryPolicy } from '@holdfast/retry';
import {
  AuthorityClient,
  connectNats,
  createRegistry,
  errorMessage,
  startParts,
  type Logger,
  type Started,
} from '@holdfast/runtime';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Registry } from 'prom-client';
import { startAlerter } from './alerter.js';
import type { AlerterConfig } from './env.js';
import { loadHoldfastConfig } from './holdfast-config.js';

/** Asks for the authority's config every second for a minute at start (it may start after us). */
const CONFIG_WAIT: RetryPolicy = { initialMs: 1_000, maxMs: 1_000, factor: 1, retryForMs: 60_000 };

export interface AlerterDeps {
  logger: Logger;
  /** Where metrics go; the ops server serves it. Default: a new registry. */
  registry?: Registry;
  /** Borrowed: the caller owns and drains it. Default: a connection of its own. */
  nc?: NatsConnection;
  /** Aborts the wait for the authority's config (a stop that comes while starting). */
  signal?: AbortSignal;
  /** Where webhook secrets are read (`secretEnv`); process.env by default. */
  secrets?: NodeJS.ProcessEnv;
}

/**
 * The alerter's own NATS connection. Without nats.js's async stack capture: with it, every
 * request (a webhook job's publish, a delivery record's, a KV read or write) builds a
 * RequestError and a TimeoutError with their stacks only to be thrown away (a backlog of
 * webhook jobs took 1.19x the CPU with them; docs/benchmarks.md). Errors are logged by message,
 * which stays.
 */
export function connectAlerterNats(
  servers: string | readonly string[],
  logger: Logger,
): Promise<NatsConnection> {
  return connectNats({ servers, name: 'holdfast-alerter', logger, noAsyncTraces: true });
}

/**
 * Starts the alerter process's parts: NATS, the Holdfast config (the file, or the authority's,
 * waited for up to a minute), then the alerter. Parts stop in reverse: alerter, then NATS.
 */
export function start(config: AlerterConfig, deps: AlerterDeps): Promise<Started> {
  const { env, nats, settings } = config;
  const { logger } = deps;
  const { names } = nats;
  return startParts(logger, async (parts) => {
    let nc = deps.nc;
    if (!nc) {
      const own = await connectAlerterNats(nats.servers, logger);
      parts.push({ name: 'nats', stop: () => own.drain() });
      nc = own;
    }
    const authority = new AuthorityClient({ nc, names });
    const holdfast = await retry(
      () => loadHoldfastConfig({ path: env.HOLDFAST_CONFIG, authority }),
      {
        policy: CONFIG_WAIT,
        signal: deps.signal,
        // A bad file never gets better; an authority that is not up yet may.
        retryable: () => env.HOLDFAST_CONFIG === undefined,
        onRetry: ({ outcome }) => {
          if (!outcome.ok) {
            logger.warn({ err: errorMessage(outcome.error) }, 'waiting for the authority config');
          }
        },
      },
    );
    const alerter = await startAlerter({
      nc,
      names,
      config: holdfast,
      configFromAuthority: env.HOLDFAST_CONFIG === undefined,
      logger,
      registry: deps.registry ?? createRegistry('alerter'),
      settings,
      secrets: deps.secrets,
    });
    parts.push({ name: 'alerter', stop: () => alerter.stop() });
    return { checks: alerter.checks };
  });
}
