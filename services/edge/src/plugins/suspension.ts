import { parseEvent, type NatsNames } from '@holdfast/events';
import type { Logger } from '@holdfast/runtime';
import type { NatsConnection } from '@nats-io/transport-node';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Calls } from '../calls.js';

export interface SuspensionPluginOptions {
  nc: NatsConnection;
  names: NatsNames;
  logger: Logger;
}

/**
 * Suspension grace (SPEC section 7): listens to `<eventsPrefix>.*.tenant.suspended` (core
 * NATS: every replica sees every notice) and ends that tenant's calls in flight, and its
 * children's, once the event's `graceMs` has passed.
 */
export const suspensionPlugin = fp(
  (app: FastifyInstance, opts: SuspensionPluginOptions) => {
    const calls = new Calls();
    const logger = opts.logger.child({ component: 'suspension' });
    const sub = opts.nc.subscribe(`${opts.names.eventsPrefix}.*.tenant.suspended`, {
      callback: (err, msg) => {
        if (err) return logger.warn({ err }, 'suspension subscription error');
        const parsed = parseEvent(msg.data);
        if (!parsed.ok || parsed.event.type !== 'tenant.suspended') {
          return logger.warn({ subject: msg.subject }, 'unreadable suspension event ignored');
        }
        const { tenant, graceMs } = parsed.event;
        const live = calls.suspend(tenant, graceMs);
        logger.info({ tenant, graceMs, live }, 'tenant suspended: calls end after the grace');
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
