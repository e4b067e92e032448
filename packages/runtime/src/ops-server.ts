import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';

export interface ReadinessCheck {
  name: string;
  check: () => Promise<boolean> | boolean;
}

/** The body of /healthz and /readyz for a service. */
async function readiness(
  checks: ReadinessCheck[],
): Promise<{ ok: boolean; checks: Record<string, boolean> }> {
  const results = await Promise.all(
    checks.map(async (c) => {
      try {
        return [c.name, await c.check()] as const;
      } catch {
        return [c.name, false] as const;
      }
    }),
  );
  return { ok: results.every(([, ok]) => ok), checks: Object.fromEntries(results) };
}

/** Registers /healthz (alive), /readyz (every dependency answers) and /metrics on an app. */
export function registerOpsRoutes(
  app: FastifyInstance,
  registry: Registry,
  checks: ReadinessCheck[],
): void {
  app.get('/healthz', () => ({ ok: true }));
  app.get('/readyz', async (_req, reply) => {
    const result = await readiness(checks);
    return reply.code(result.ok ? 200 : 503).send(result);
  });
  app.get('/metrics', async (_req, reply) => {
    return reply.header('content-type', registry.contentType).send(await registry.metrics());
  });
}

export interface OpsServerOptions {
  host?: string;
  port: number;
  logger: Logger;
  registry: Registry;
  checks: ReadinessCheck[];
}

/** A small HTTP server for services that have no other HTTP surface. */
export async function startOpsServer(
  opts: OpsServerOptions,
): Promise<{ app: FastifyInstance; port: number; stop: () => Promise<void> }> {
  const loggerInstance: FastifyBaseLogger = opts.logger.child({ component: 'ops-http' });
  const app = Fastify({
    loggerInstance,
    logController: new LogController({ disableRequestLogging: true }),
  });
  registerOpsRoutes(app, opts.registry, opts.checks);
  await app.listen({ host: opts.host ?? '0.0.0.0', port: opts.port });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : opts.port;
  opts.logger.info({ port }, 'ops server listening (/healthz, /readyz, /metrics)');
  return { app, port, stop: () => app.close() };
}
