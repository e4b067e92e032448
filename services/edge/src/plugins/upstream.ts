import type { Logger } from '@holdfast/runtime';
import { TokenCounter, type TokenizerName } from '@holdfast/tokenizer';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { UpstreamClient } from '../upstream/client.js';
import { LimitsReporter, takeCount } from '../upstream/limits-reporter.js';

export interface UpstreamPluginOptions {
  logger: Logger;
  /** Where upstream API keys are read (`apiKeyEnv`). */
  env: NodeJS.ProcessEnv;
  /** Encodings loaded in the worker pool at start (empty: loaded on first long prompt). */
  warmPool: readonly TokenizerName[];
}

/**
 * The model side: the undici agent towards upstreams, and the token counter (worker pool for
 * long prompts, a fair queue per tenant, its metrics). Both are closed with the app.
 */
export const upstreamPlugin = fp(
  async (app: FastifyInstance, opts: UpstreamPluginOptions) => {
    const o = app.edgeOptions;
    const logger = opts.logger.child({ component: 'upstream' });
    // The authority plugin registers after this one; the reporter reaches it once calls run.
    const limits = new LimitsReporter(() => app.authority, logger);
    const upstream = new UpstreamClient({
      logger,
      metrics: app.metrics,
      timeouts: o.upstream,
      retry: o.upstream,
      env: opts.env,
      onLimits: (target, seen, model) => limits.seen(target, seen, model),
      connections: o.upstream.connections,
      tenantShare: o.upstream.tenantShare,
      takeCount: (tenant, target) =>
        takeCount(() => app.authority, tenant, target, o.admitTimeoutMs, logger),
    });
    const { metrics } = app;
    const counter = new TokenCounter({
      maxQueuedChars: o.counting.queueChars,
      timeoutMs: o.counting.timeoutMs,
      observer: {
        started: (tenant, waitedMs) => metrics.countWait.observe({ tenant }, waitedMs / 1_000),
        timedOut: (tenant) => metrics.countTimeouts.inc({ tenant }),
      },
    });
    metrics.watchCounting(() => counter.queues());
    app.decorate('upstream', upstream);
    app.decorate('counter', counter);
    app.addHook('onClose', async () => {
      await upstream.close();
      await counter.close();
    });
    if (opts.warmPool.length > 0) await counter.warmUp(opts.warmPool);
  },
  { name: 'holdfast-upstream', dependencies: ['holdfast-observability'] },
);
