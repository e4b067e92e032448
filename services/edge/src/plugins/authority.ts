import { setTimeout as sleep } from 'node:timers/promises';
import {
  authorityStartedSubject,
  prepareCallPathReplies,
  prepareEventChecks,
  type NatsNames,
} from '@holdfast/events';
import { AuthorityClient, onReconnect, type Logger } from '@holdfast/runtime';
import type { NatsConnection } from '@nats-io/transport-node';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { CompiledConfig } from '@holdfast/config';
import { loadTokenizer } from '@holdfast/tokenizer';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { ensureClosesStream } from '@holdfast/runtime';
import { ConfigSnapshot } from '../authority/config-snapshot.js';
import { Holds } from '../authority/holds.js';
import { RefusalMemory } from '../authority/refusal-memory.js';
import { seedSuspensions } from './suspension.js';

export interface AuthorityPluginOptions {
  nc: NatsConnection;
  names: NatsNames;
  logger: Logger;
}

/**
 * The budget authority as the edge sees it: the typed NATS client, the config snapshot (kept
 * fresh by notices and polling) and the hold closer, woken when an authority starts. On close the snapshot stops and every
 * settle/release still running is waited for.
 */
export const authorityPlugin = fp(
  async (app: FastifyInstance, opts: AuthorityPluginOptions) => {
    const o = app.edgeOptions;
    // The admit and close replies' parses, and the events' checks (a suspension read), compiled
    // before the edge is ready: on its first call they took the event loop 1-3 s at load 30.
    prepareCallPathReplies();
    prepareEventChecks();
    const authority = new AuthorityClient({
      nc: opts.nc,
      names: opts.names,
      timeoutMs: o.admitTimeoutMs,
      batch: o.authorityBatch,
    });
    const snapshot = new ConfigSnapshot({
      authority,
      nc: opts.nc,
      names: opts.names,
      logger: opts.logger.child({ component: 'config' }),
      pollMs: o.configPollMs,
      onLoad: (cfg) => warmEncodings(cfg, opts.logger),
    });
    const refusals = new RefusalMemory({
      ...o.refusals,
      authority,
      config: () => snapshot.current,
      metrics: app.metrics,
      logger: opts.logger.child({ component: 'refusals' }),
    });
    const holds = new Holds({
      closes: {
        started: (ref) => refusals.closing(ref.org, ref.tenant),
        ended: (ref) => refusals.closed(ref.org, ref.tenant),
      },
      authority,
      js: jetstream(opts.nc),
      names: opts.names,
      logger: opts.logger.child({ component: 'holds' }),
      metrics: app.metrics,
      timeoutMs: o.settleTimeoutMs,
      attempts: o.settleAttempts,
    });
    // An authority replica that (re)starts says so: the closes and refusal counts owed to it
    // go now.
    const started = opts.nc.subscribe(authorityStartedSubject(opts.names), {
      callback: () => {
        holds.wake();
        refusals.wake();
      },
    });
    // So does the edge's own NATS connection coming back (the authority may have reconnected
    // first, its notice lost meanwhile).
    const stopReconnects = onReconnect(opts.nc, () => {
      holds.wake();
      refusals.wake();
    });
    // A resumed team's suspension refusals are forgotten (the event's subject names the team:
    // `<eventsPrefix>.<tenant>.tenant.resumed`).
    const resumed = opts.nc.subscribe(`${opts.names.eventsPrefix}.*.tenant.resumed`, {
      callback: (_err, msg) => {
        const tokens = msg.subject.split('.');
        const tenant = tokens[tokens.length - 3];
        if (tenant) refusals.resumed(tenant);
      },
    });
    const stopSeeding = seedSuspensions(
      authority,
      app.calls,
      opts.logger.child({ component: 'suspension' }),
      opts.nc,
    );
    app.decorate('authority', authority);
    app.decorate('configSnapshot', snapshot);
    app.decorate('holds', holds);
    app.decorate('refusals', refusals);
    app.addHook('onClose', async () => {
      stopSeeding();
      await snapshot.stop();
      // Calls cut by the close settle what they used; wait for them, then for those settles.
      const deadline = Date.now() + 5_000;
      while (app.calls.count() > 0 && Date.now() < deadline) await sleep(10);
      await holds.drain();
      await refusals.stop();
      started.unsubscribe();
      resumed.unsubscribe();
      stopReconnects();
    });
    await snapshot.start();
    // Closes the authority cannot take wait in this stream; make sure it exists (idempotent).
    const streams = { replicas: o.streamReplicas, logger: opts.logger };
    await ensureClosesStream(await jetstreamManager(opts.nc), opts.names, streams).catch(
      (err: unknown) =>
        opts.logger.warn({ err }, 'closes stream not ensured; deferred closes will retry'),
    );
  },
  { name: 'holdfast-authority', dependencies: ['holdfast-observability', 'holdfast-suspension'] },
);

/**
 * Loads the encodings the configured models use, so no request pays for loading one (about
 * half a second of blocked event loop each, measured).
 */
function warmEncodings(cfg: CompiledConfig, logger: Logger): void {
  const names = new Set([...cfg.models.values()].map((m) => m.tokenizer));
  // Output of models counted without their own tokenizer is cut by o200k's count.
  names.add('o200k_base');
  for (const name of names) {
    if (name === 'upstream' || name === 'estimate') continue;
    loadTokenizer(name).catch((err: unknown) =>
      logger.error({ err, name }, 'tokenizer failed to load'),
    );
  }
}
