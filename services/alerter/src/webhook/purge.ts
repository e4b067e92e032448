import {
  every,
  purgeAcked,
  purgeForgetsPending,
  type Logger,
  type Periodic,
} from '@holdfast/runtime';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { AlerterMetrics } from '../metrics.js';
import { consumerOf } from './consumers.js';

export interface AckedJobsPurgerOptions {
  /** Its server's version says whether a purge forgets unacked deliveries (purge-acked.ts). */
  nc: NatsConnection;
  /** Publishes again the jobs a purge on an older server may have forgotten (purge-acked.ts). */
  js: JetStreamClient;
  jsm: JetStreamManager;
  /** The webhook queue (limits retention: an ack deletes nothing, queue.ts). */
  stream: string;
  /** How often (ALERTER_WEBHOOK_PURGE_EVERY_MS). */
  everyMs: number;
  logger: Logger;
  metrics: AlerterMetrics;
}

/**
 * Purges each webhook's delivered jobs from the queue, every `everyMs`: those of its subject up
 * to its consumer's ack floor, which it never delivers again. Without it the queue keeps every
 * job for its max age (7 h: about 2.5 M jobs for a webhook taking 100 settlements a second).
 * Every replica runs it; a purge another one did first finds nothing left. A consumer whose
 * floor has not moved since this replica's last purge is skipped, and on nats-server before
 * 2.9.15 so is one with jobs delivered and not yet acked (a purge there would forget them:
 * in flight, or waiting for a retry), so a failing webhook's jobs stay until its floor moves.
 */
export class AckedJobsPurger {
  readonly #o: AckedJobsPurgerOptions;
  readonly #forgetsPending: boolean;
  /** Each consumer's ack floor at this replica's last purge of it. */
  readonly #purgedTo = new Map<string, number>();
  #timer: Periodic | undefined;

  constructor(opts: AckedJobsPurgerOptions) {
    this.#o = opts;
    this.#forgetsPending = purgeForgetsPending(opts.nc.info?.version);
  }

  start(): void {
    this.#timer = every(this.#o.everyMs, () => this.purge(), {
      logger: this.#o.logger,
      failed: 'webhook queue not purged',
    });
  }

  /** Stops the timer and waits for a purge under way. */
  async stop(): Promise<void> {
    await this.#timer?.stop();
  }

  /** One pass over the webhooks' consumers; returns how many jobs it purged. */
  async purge(): Promise<number> {
    const { js, jsm, stream, metrics, logger } = this.#o;
    let total = 0;
    for await (const c of jsm.consumers.list(stream)) {
      const webhook = c.name.slice(consumerOf('').length);
      if (c.name !== consumerOf(webhook)) continue;
      const floor = c.ack_floor.stream_seq;
      if (floor <= (this.#purgedTo.get(c.name) ?? 0)) continue;
      const r = await purgeAcked(jsm, js, c, { forgetsPending: this.#forgetsPending });
      if (r.kind === 'skipped') continue;
      this.#purgedTo.set(c.name, r.floor);
      total += r.purged;
      metrics.webhookJobsPurged.inc({ webhook }, r.purged);
      if (r.raced) {
        logger.warn(
          { webhook, floor: r.floor, requeued: r.requeued },
          'webhook jobs delivered during a purge queued again (this NATS server forgets them in a purge)',
        );
      }
      if (r.purged > 0) logger.info({ webhook, purged: r.purged, floor }, 'webhook jobs purged');
    }
    return total;
  }
}
