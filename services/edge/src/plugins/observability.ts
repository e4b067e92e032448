import { registerOpsRoutes, type ReadinessCheck } from '@holdfast/runtime';
import type { NatsConnection } from '@nats-io/transport-node';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Registry } from 'prom-client';
import { H } from '../request/headers.js';
import { EdgeMetrics } from '../metrics.js';
import type { Audit } from '../types.js';
import { summaryLine, summaryLogger } from './summary-line.js';

/**
 * Counts a finished request and writes its summary line. Runs from onResponse, and directly
 * for a client that left before its response finished (status 499, as nginx logs it).
 */
export function recordRequest(request: FastifyRequest, status: number, ms: number): void {
  const route = request.routeOptions.url ?? 'unmatched';
  const code = request.audit.code ?? '';
  request.server.metrics.requests.inc({ route, status: String(status), code });
  if (!route.startsWith('/v1/')) return;
  summaryLogger(request.server.log).info(summaryLine(request, route, status, ms), 'request');
}

/**
 * The edge's readiness, the one list /readyz answers and `start` returns: one check, named
 * `config` as /readyz has always shown it, true once a config is loaded while NATS is up.
 */
export function readinessChecks(app: FastifyInstance, nc: NatsConnection): ReadinessCheck[] {
  return [
    {
      name: 'config',
      check: () => app.configSnapshot.current !== undefined && !nc.isClosed(),
    },
  ];
}

export interface ObservabilityOptions {
  registry: Registry;
  /** What /readyz answers (`readinessChecks`). */
  checks: ReadinessCheck[];
}

/**
 * Metrics, /healthz, /readyz, /metrics, and one summary log line per request (secrets never
 * appear: the line carries its known fields only, ids and counts, never a header; see
 * summary-line.ts).
 */
export const observabilityPlugin = fp(
  (app: FastifyInstance, opts: ObservabilityOptions) => {
    const metrics = new EdgeMetrics(opts.registry);
    app.decorate('metrics', metrics);
    app.decorateRequest('caller', null);
    app.decorateRequest('open', null);
    // Set per request in onRequest below (a shared default object would leak between requests).
    app.decorateRequest('audit', null as unknown as Audit);
    app.addHook('onRequest', (request, reply, done) => {
      request.audit = {};
      reply.header(H.requestId, request.id);
      done();
    });
    app.addHook('onResponse', (request, reply, done) => {
      recordRequest(request, reply.statusCode, reply.elapsedTime);
      done();
    });
    registerOpsRoutes(app, opts.registry, opts.checks);
  },
  { name: 'holdfast-observability' },
);
