import type { NatsNames } from '@holdfast/events';
import { createLogger, createRegistry, type Logger } from '@holdfast/runtime';
import type { NatsConnection } from '@nats-io/transport-node';
import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { buildEdge } from './app.js';
import { DEFAULT_OPTIONS, type EdgeOptions } from './config.js';

export { buildEdge, edgeApp, type EdgeDeps } from './app.js';
export {
  DEFAULT_OPTIONS,
  EdgeEnv,
  loadConfig,
  type EdgeConfig,
  optionsFromEnv,
  type EdgeOptions,
  type UpstreamRetry,
  type UpstreamTimeouts,
} from './config.js';
export { EDGE_ERROR_CODES, httpError, type EdgeErrorCode } from './errors.js';
export { H as HOLDFAST_HEADERS } from './headers.js';
export { sha256Hex } from './auth.js';
export { start, type EdgeServiceDeps, type StartedEdge } from './service.js';

export interface StartEdgeOptions {
  nc: NatsConnection;
  names: NatsNames;
  /** Default: a silent logger. */
  logger?: Logger;
  registry?: Registry;
  /** Merged over DEFAULT_OPTIONS. */
  options?: Partial<Omit<EdgeOptions, 'upstream'>> & {
    upstream?: Partial<EdgeOptions['upstream']>;
  };
  env?: NodeJS.ProcessEnv;
  host?: string;
  /** Default 0: a free port. */
  port?: number;
}

export interface RunningEdge {
  app: FastifyInstance;
  url: string;
  port: number;
  stop(): Promise<void>;
}

/** Starts an edge listening on a port, in-process (tests, the local stack, benchmarks). */
export async function startEdge(opts: StartEdgeOptions): Promise<RunningEdge> {
  const app = await buildEdge({
    nc: opts.nc,
    names: opts.names,
    logger: opts.logger ?? createLogger({ name: 'edge', level: 'silent' }),
    registry: opts.registry ?? createRegistry('edge'),
    options: {
      ...DEFAULT_OPTIONS,
      ...opts.options,
      upstream: { ...DEFAULT_OPTIONS.upstream, ...opts.options?.upstream },
    },
    env: opts.env,
  });
  const host = opts.host ?? '127.0.0.1';
  await app.listen({ host, port: opts.port ?? 0 });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : (opts.port ?? 0);
  return { app, url: `http://${host}:${port}`, port, stop: () => app.close() };
}
