import { setTimeout as sleep } from 'node:timers/promises';
import type { NatsNames } from '@holdfast/events';
import { AuthorityClient, type Logger } from '@holdfast/runtime';
import type { NatsConnection } from '@nats-io/transport-node';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { ConfigSnapshot } from '../config-snapshot.js';
import { Holds } from '../holds.js';

export interface AuthorityPluginOptions {
  nc: NatsConnection;
  names: NatsNames;
  logger: Logger;
}

/**
 * The budget authority as the edge sees it: the typed NATS client, the config snapshot (kept
 * fresh by notices and polling) and the hold closer. On close the snapshot stops and every
 * settle/release still running is waited for.
 */
export const authorityPlugin = fp(
  async (app: FastifyInstance, opts: AuthorityPluginOptions) => {
    const o = app.edgeOptions;
    const authority = new AuthorityClient({
      nc: opts.nc,
      names: opts.names,
      timeoutMs: o.admitTimeoutMs,
    });
    const snapshot = new ConfigSnapshot({
      authority,
      nc: opts.nc,
      names: opts.names,
      logger: opts.logger.child({ component: 'config' }),
      pollMs: o.configPollMs,
    });
    const holds = new Holds({
      authority,
      logger: opts.logger.child({ component: 'holds' }),
      metrics: app.metrics,
      timeoutMs: o.settleTimeoutMs,
      attempts: o.settleAttempts,
    });
    app.decorate('authority', authority);
    app.decorate('configSnapshot', snapshot);
    app.decorate('holds', holds);
    app.addHook('onClose', async () => {
      await snapshot.stop();
      // Calls cut by the close settle what they used; wait for them, then for those settles.
      const deadline = Date.now() + 5_000;
      while (app.calls.count() > 0 && Date.now() < deadline) await sleep(10);
      await holds.drain();
    });
    await snapshot.start();
  },
  { name: 'holdfast-authority', dependencies: ['holdfast-observability', 'holdfast-suspension'] },
);
