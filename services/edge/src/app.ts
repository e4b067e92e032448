import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { NatsNames } from '@holdfast/events';
import type { Logger } from '@holdfast/runtime';
import type { TokenizerName } from '@holdfast/tokenizer';
import type { NatsConnection } from '@nats-io/transport-node';
import fp from 'fastify-plugin';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { adminRoutes } from './admin/plugin.js';
import type { EdgeOptions } from './env.js';
import { authorityPlugin } from './plugins/authority.js';
import { errorsPlugin } from './plugins/errors.js';
import { observabilityPlugin, readinessChecks } from './plugins/observability.js';
import { requestLogFactory } from './plugins/request-log.js';
import { suspensionPlugin } from './plugins/suspension.js';
import { upstreamPlugin } from './plugins/upstream.js';
import { v1Routes } from './routes/v1.js';
import { untilTaken } from './request/response-gone.js';
import { zodValidatorCompiler } from './schemas/validate.js';
import { statusRoutes } from './status/routes.js';
import './types.js';

export interface EdgeDeps {
  /** Borrowed: the caller (main.ts, a test) owns and drains it. */
  nc: NatsConnection;
  names: NatsNames;
  logger: Logger;
  registry: Registry;
  options: EdgeOptions;
  /** Where upstream API keys are read (`apiKeyEnv`); process.env by default. */
  env?: NodeJS.ProcessEnv;
  /** Encodings to load into the counting workers at start (default: none, loaded on use). */
  warmPool?: readonly TokenizerName[];
}

/**
 * The edge as a fastify plugin: ops routes and metrics, the authority (config, holds), the
 * upstream client and token counter, suspension watching, then the OpenAI API under /v1, the
 * budgets (status page and /v1/budgets) and the admin API under /admin.
 * Not encapsulated, so the instance that registers it sees its decorations.
 */
const edgeApp = fp(registerEdge, { name: 'holdfast-edge' });

async function registerEdge(app: FastifyInstance, deps: EdgeDeps): Promise<void> {
  app.decorate('edgeOptions', deps.options);
  await app.register(errorsPlugin);
  await app.register(observabilityPlugin, {
    registry: deps.registry,
    checks: readinessChecks(app, deps.nc),
  });
  await app.register(upstreamPlugin, {
    logger: deps.logger,
    env: deps.env ?? process.env,
    warmPool: deps.warmPool ?? [],
  });
  await app.register(suspensionPlugin, { nc: deps.nc, names: deps.names, logger: deps.logger });
  await app.register(authorityPlugin, { nc: deps.nc, names: deps.names, logger: deps.logger });
  await app.register(v1Routes);
  await app.register(statusRoutes);
  await app.register(adminRoutes, { prefix: '/admin', logger: deps.logger });
}

/**
 * A request whose headers and body have not arrived `ms` after it began is cut: its socket is
 * destroyed. A client sending its body a byte at a time cannot hold a connection (and a
 * worker's memory) forever. The response, however long it streams, is not limited.
 */
function guardSlowRequests(app: FastifyInstance, ms: number): void {
  const timers = new WeakMap<object, NodeJS.Timeout>();
  app.addHook('onRequest', (request, _reply, done) => {
    const timer = setTimeout(() => {
      request.log.warn({ ms }, 'request not received in time: connection closed');
      app.metrics.slowRequests.inc();
      request.raw.destroy();
    }, ms);
    timer.unref();
    timers.set(request, timer);
    done();
  });
  const clear = (request: object) => clearTimeout(timers.get(request));
  app.addHook('preHandler', (request, _reply, done) => {
    clear(request);
    done();
  });
  app.addHook('onResponse', (request, _reply, done) => {
    clear(request);
    done();
  });
  app.addHook('onRequestAbort', (request, done) => {
    clear(request);
    done();
  });
}

/**
 * A connection that has not sent a whole request head `ms` after it opened is cut: one that
 * sends nothing at all was kept open for ever (node checks a request's deadlines only from its
 * first byte), one sending its first head a byte at a time until node's next periodic check. Each
 * took a file descriptor and memory of the edge's for as long as its client liked, so enough of
 * them starved the edge's own sockets (upstreams, NATS). Later requests on a kept-alive
 * connection are node's: it checks their deadline every `checkEveryMs` (below).
 */
function guardIdleConnections(app: FastifyInstance, ms: number): void {
  const timers = new WeakMap<object, NodeJS.Timeout>();
  app.server.on('connection', (socket: Socket) => {
    const timer = setTimeout(() => {
      app.log.warn({ ms }, 'connection sent no request in time: closed');
      app.metrics.slowRequests.inc();
      socket.destroy();
    }, ms);
    timer.unref();
    timers.set(socket, timer);
    socket.once('close', () => clearTimeout(timer));
  });
  app.server.on('request', (request: IncomingMessage) => clearTimeout(timers.get(request.socket)));
}

/**
 * At most `max` client connections open at once (0: no bound): node closes one past it as it
 * accepts it. Without it, clients could open connections until the process had no file
 * descriptor left, and then the edge's own sockets (to upstreams, NATS) failed, for every
 * tenant; at the bound the calls in flight, and clients already connected, go on.
 */
function boundConnections(app: FastifyInstance, max: number): void {
  if (max <= 0) return;
  app.server.maxConnections = max;
  app.server.on('drop', () => app.metrics.droppedConnections.inc());
}

/** A reply the edge has ended is taken by its client in time, or its connection is closed. */
function guardUnreadReplies(app: FastifyInstance, ms: number): void {
  app.addHook('onRequest', (_request, reply, done) => {
    reply.raw.once('prefinish', () => untilTaken(reply.raw, ms));
    done();
  });
}

/** How often node looks for requests past their deadline (its default is every 30 s). */
const checkEveryMs = (requestTimeoutMs: number) => Math.min(1_000, requestTimeoutMs);

/** A fastify instance with the edge registered and ready (not listening). */
export async function buildEdge(deps: EdgeDeps): Promise<FastifyInstance> {
  const loggerInstance: FastifyBaseLogger = deps.logger;
  const app: FastifyInstance = Fastify({
    loggerInstance,
    // One summary line per request is written by the observability plugin instead.
    logController: new LogController({ disableRequestLogging: true }),
    // request.log's child is made on its first line, not with every request (request-log.ts).
    childLoggerFactory: requestLogFactory,
    bodyLimit: deps.options.bodyLimitBytes,
    // Open streams must not keep close() waiting; their holds are settled as aborted.
    forceCloseConnections: true,
    requestIdHeader: false,
    genReqId: () => randomUUID(),
    trustProxy: deps.options.trustProxy,
    // Node's own check of slow requests, the heads of later requests on a kept-alive connection
    // included (the first is guardIdleConnections'); the edge's deadline on a body is exact.
    requestTimeout: deps.options.requestTimeoutMs,
    http: {
      requestTimeout: deps.options.requestTimeoutMs,
      headersTimeout: deps.options.requestTimeoutMs,
      connectionsCheckingInterval: checkEveryMs(deps.options.requestTimeoutMs),
    },
  });
  guardIdleConnections(app, deps.options.requestTimeoutMs);
  boundConnections(app, deps.options.maxConnections);
  guardSlowRequests(app, deps.options.requestTimeoutMs);
  guardUnreadReplies(app, deps.options.requestTimeoutMs);
  app.setValidatorCompiler(zodValidatorCompiler);
  await app.register(edgeApp, deps);
  await app.ready();
  return app;
}
