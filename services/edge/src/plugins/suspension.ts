import { parseEvent, type NatsNames } from '@holdfast/events';
import type { AuthorityClient, Logger } from '@holdfast/runtime';
import type { NatsConnection } from '@nats-io/transport-node';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Calls } from '../call/in-flight.js';

/** Tries at asking the authority for the suspensions in force at start, a second apart. */
const SEED_ATTEMPTS = 60;

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
 * resume. A resume cancels the grace ends still pending. The suspensions in force at start are
 * asked of the authority (`seedSuspensions`), for what failOpen may serve while it is down.
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

/**
 * The suspensions already in force when this edge started, which no event will tell it of (a
 * failOpen team's call while the authority is down is refused when suspended): asked of the
 * authority (its usage) once, again every second while it does not answer, at most a minute.
 * Returns the function that stops asking.
 */
export function seedSuspensions(
  authority: Pick<AuthorityClient, 'usage'>,
  calls: Calls,
  logger: Logger,
  nc: NatsConnection,
): () => void {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const seed = async (attempt: number): Promise<void> => {
    const usage = await authority.usage({});
    if (stopped) return;
    if (usage.ok) {
      const taken = calls.suspendedAlready(
        usage.value.tenants.filter((t) => t.suspended).map((t) => t.tenant),
      );
      if (taken.length > 0) logger.info({ tenants: taken }, 'suspended at start');
      return;
    }
    const retry = ['timeout', 'no_responders', 'budget_store_unavailable'].includes(
      usage.error.code,
    );
    if (!retry || attempt >= SEED_ATTEMPTS || nc.isClosed()) {
      logger.warn({ code: usage.error.code }, 'suspensions at start unknown');
      return;
    }
    timer = setTimeout(() => void seed(attempt + 1), 1_000);
    timer.unref();
  };
  void seed(1);
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
