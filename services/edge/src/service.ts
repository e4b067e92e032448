import {
  connectNats,
  createLogger,
  createRegistry,
  startParts,
  type Logger,
  type Started,
} from '@holdfast/runtime';
import type { TokenizerName } from '@holdfast/tokenizer';
import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import type { NatsNames } from '@holdfast/events';
import type { NatsConnection } from '@nats-io/transport-node';
import { buildEdge } from './app.js';
import { DEFAULT_OPTIONS, type EdgeConfig, type EdgeOptions } from './env.js';
import { readinessChecks } from './plugins/observability.js';

export interface EdgeServiceDeps {
  logger: Logger;
  /** Where metrics go; the edge serves it on /metrics. Default: a new registry. */
  registry?: Registry;
  /** Where upstream API keys are read (`apiKeyEnv`); process.env by default. */
  env?: NodeJS.ProcessEnv;
  /** Encodings to load into the counting workers at start. */
  warmPool?: readonly TokenizerName[];
}

export interface StartedEdge extends Started {
  app: FastifyInstance;
  port: number;
}

/**
 * Starts the edge: NATS, then the fastify plugin tree (app.ts) listening on EDGE_HOST:EDGE_PORT,
 * which also serves /healthz, /readyz and /metrics. Parts stop in reverse: the HTTP server
 * (cutting open streams, settling them), then NATS.
 */
export function start(config: EdgeConfig, deps: EdgeServiceDeps): Promise<StartedEdge> {
  const { env, nats, options } = config;
  const { logger } = deps;
  return startParts(logger, async (parts) => {
    // One admit and one settle per call: skip the per-request stack capture of nats.js.
    const nc = await connectNats({
      servers: nats.servers,
      name: 'edge',
      logger,
      noAsyncTraces: true,
    });
    parts.push({ name: 'nats', stop: () => nc.drain() });
    const app = await buildEdge({
      nc,
      names: nats.names,
      logger,
      registry: deps.registry ?? createRegistry('edge'),
      options,
      env: deps.env,
      warmPool: deps.warmPool,
    });
    parts.push({ name: 'http', stop: () => app.close() });
    await app.listen({ host: env.EDGE_HOST, port: env.EDGE_PORT });
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : env.EDGE_PORT;
    return {
      app,
      port,
      checks: readinessChecks(app, nc),
    };
  });
}

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
