import { parseEvent, type NatsNames } from '@holdfast/events';
import type { Logger } from '@holdfast/runtime';
import type { NatsConnection } from '@nats-io/transport-node';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Calls } from '../call/in-flight.js';

export interface SuspensionPluginOptions {
  nc: NatsConnection;
  names: NatsNames;
  logger: Logger;
}

/**
 * Suspension grace (docs/alerts.md): listens to `<eventsPrefix>.*.tenant.suspended` and
 * `.tenant.resumed` (core NATS: every replica sees every notice). A suspension ends that
 * tenant's calls in flight, and its children's, once the event's `graceMs` has passed; only
 * calls admitted before the event's time, so a late notice never ends calls admitted after a
 * resume. A resume cancels the grace ends still pending.
 */
export const suspensionPlugin = fp(
  (app: FastifyInstance, opts: SuspensionPluginOptions) => {
    const calls = new Calls();
    const logger = opts.logger.child({ component: 'suspension' });
    const sub = opts.nc.subscribe(`${opts.names.eventsPrefix}.*.tenant.*`, {
      callback: (err, msg) => {
        if (err) return logger.warn({ err }, 'suspension subscription error');
        const parsed = parseEvent(msg.data);
        if (!parsed.ok) {
          return logger.warn({ subject: msg.subject }, 'unreadable suspension event ignored');
        }
        const e = parsed.value;
        if (e.type === 'tenant.suspended') {
          const live = calls.suspend(e.tenant, e.graceMs, Date.parse(e.time));
          logger.info(
            { tenant: e.tenant, graceMs: e.graceMs, live },
            'tenant suspended: calls end after the grace',
          );
        } else if (e.type === 'tenant.resumed') {
          const cancelled = calls.resume(e.tenant);
          if (cancelled > 0) logger.info({ tenant: e.tenant, cancelled }, 'tenant resumed');
        }
      },
    });
    app.decorate('calls', calls);
    app.addHook('onClose', async () => {
      calls.close();
      await sub.drain().catch(() => undefined);
    });
  },
  { name: 'holdfast-suspension' },
);
