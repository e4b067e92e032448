import { randomUUID } from 'node:crypto';
import { watchFile, unwatchFile } from 'node:fs';
import {
  AdmitRequest,
  OwnsRequest,
  authorityStartedSubject,
  CALL_PATH_CHECKS,
  prepareEventChecks,
  CapacityCountRequest,
  CapacityMoveRequest,
  CapacityRetryRequest,
  CapacityReportRequest,
  RefusalsReportRequest,
  ConfigApplyRequest,
  ConfigGetRequest,
  ExtendRequest,
  ReleaseRequest,
  RenewRequest,
  ResumeRequest,
  SettleRequest,
  SuspendRequest,
  UsageRequest,
  type AuthorityOperation,
  type BatchedOperation,
  type NatsNames,
} from '@holdfast/events';
import {
  authoritySubject,
  ensureEventsStream,
  errorMessage,
  every,
  Ok,
  onReconnect,
  serve,
  serveBatch,
  type Handler,
  type Periodic,
  type Route,
} from '@holdfast/runtime';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { RedisClient } from './redis.js';
import type { Logger } from '@holdfast/runtime';
import type { Registry } from 'prom-client';
import type { z } from 'zod';
import { ClosesConsumer } from './closes-consumer.js';
import { reportCapacity, takeCount, takeRetry } from './capacity.js';
import { moveCapacity } from './capacity-move.js';
import { ConfigStore } from './config-store.js';
import type { HandlerContext } from './context.js';
import { ExpirySweeper } from './expiry-sweeper.js';
import { admit, owns } from './handlers/admit.js';
import { release, settle } from './handlers/close.js';
import { extend, renew } from './handlers/extend.js';
import { reportRefusals } from './handlers/refusals.js';
import { setSuspension } from './handlers/suspension.js';
import { usage } from './handlers/usage.js';
import { Keys } from './keys.js';
import { AuthorityMetrics } from './metrics.js';
import { OutboxRelay } from './outbox-relay.js';
import { loadScripts } from './scripts.js';
import { migrateGlobalKeys } from './migrate.js';
import { setDurability, type Durability } from './durable.js';
import { whileStoreStarts, withStore } from './store-error.js';

export interface AuthorityOptions {
  /** Command connection. Set `enableOfflineQueue: false` so a Redis outage fails fast (closed). */
  redis: RedisClient;
  nc: NatsConnection;
  names: NatsNames;
  logger: Logger;
  registry: Registry;
  /** Redis key prefix (default `hf`). */
  keyPrefix?: string;
  /**
   * Epoch ms; tests inject one to move time. Without one, every Lua script reads Redis's
   * own clock (TIME), so replicas on skewed hosts still decide windows against one time.
   */
  clock?: () => number;
  /**
   * Scripts read Redis TIME even with a clock injected (that clock then only drives what the
   * process does on its own, like the sweeper: a test of a replica whose clock is skewed).
   */
  redisTime?: boolean;
  replicaId?: string;
  /** Applied at start and whenever the file changes (and on SIGHUP, via `reloadConfigFile`). */
  configFile?: string;
  /** How often to look for a config applied by another replica, ms. */
  configPollMs?: number;
  sweepIntervalMs?: number;
  /** How often acked closes the closes stream kept are looked for and purged, ms (60 s). */
  closesPurgeEveryMs?: number;
  relayLeaseMs?: number;
  /** Pause after a relay round smaller than a batch, ms. */
  relayPauseMs?: number;
  /** Replicas each write waits for before the answer (durable.ts); none by default. */
  durability?: Durability;
  /** Replicas of the streams the authority creates (events, dead letters, closes). */
  streamReplicas?: number;
}

/**
 * The budget authority: answers admit/settle/release/usage/suspend/resume/config over NATS
 * request-reply in a queue group, keeps every budget in Redis (changed only by Lua), and
 * relays the outbox to JetStream.
 */
export class Authority {
  readonly ctx: HandlerContext;
  readonly #o: AuthorityOptions;
  readonly #relay: OutboxRelay;
  readonly #sweeper: ExpirySweeper;
  #closes: ClosesConsumer | undefined;
  readonly #subs: Subscription[] = [];
  #configPoll: Periodic | undefined;
  #durable: { close: () => void } | undefined;
  #stopReconnects: () => void = () => {};
  /** Says this replica serves (again): at its start, and each time its Redis is back. */
  readonly #announceServing = (): void => {
    if (!this.#o.nc.isClosed()) this.#o.nc.publish(authorityStartedSubject(this.#o.names));
  };

  constructor(opts: AuthorityOptions) {
    this.#o = opts;
    const keys = new Keys(opts.keyPrefix ?? 'hf');
    const clock = opts.clock ?? Date.now;
    const injected = opts.clock;
    const scriptNow = injected && !opts.redisTime ? () => injected() : () => undefined;
    const config = new ConfigStore({ redis: opts.redis, keys, logger: opts.logger, clock });
    const metrics = new AuthorityMetrics(opts.registry, {
      holds: () => this.#countHolds(),
      outbox: () => this.#countOutbox(),
    });
    this.ctx = { redis: opts.redis, keys, config, logger: opts.logger, metrics, clock, scriptNow };
    this.#relay = new OutboxRelay({
      redis: opts.redis,
      nc: opts.nc,
      names: opts.names,
      keys,
      config,
      logger: opts.logger.child({ component: 'outbox-relay' }),
      metrics,
      replicaId: opts.replicaId ?? randomUUID(),
      leaseMs: opts.relayLeaseMs,
      pauseMs: opts.relayPauseMs,
    });
    this.#sweeper = new ExpirySweeper(
      this.ctx,
      this.#relay,
      opts.logger.child({ component: 'expiry' }),
      opts.sweepIntervalMs,
    );
  }

  /** Serves requests, runs the relay, sweeper and closes consumer, then announces the start. */
  async start(): Promise<void> {
    const { nc, names, logger } = this.#o;
    const { redis, durability } = this.#o;
    // Each step is idempotent: one that Redis did not answer in time is run again.
    if (durability) this.#durable = await setDurability(redis, durability);
    await whileStoreStarts(logger, 'scripts', () => loadScripts(redis));
    const streams = { replicas: this.#o.streamReplicas, logger };
    await ensureEventsStream(await jetstreamManager(nc), names, streams);
    await whileStoreStarts(logger, 'migrate', () =>
      migrateGlobalKeys(redis, this.ctx.keys, logger),
    );
    await whileStoreStarts(logger, 'config', () => this.ctx.config.refresh());
    if (this.#o.configFile) await this.reloadConfigFile();
    // Compiled here, before anything is served (so before /readyz answers): on the first
    // admit and its first relayed event they took ~0.1 s, 1-3 s on a loaded box, past the
    // edge's 1 s admit timeout (the first call after a restart was a 503).
    for (const check of Object.values(CALL_PATH_CHECKS)) check.prepare();
    prepareEventChecks();
    const ctx = this.ctx;
    const callPath = {
      admit: route(AdmitRequest, (req) => admit(ctx, req), CALL_PATH_CHECKS.admit),
      extend: route(ExtendRequest, (req) => extend(ctx, req), CALL_PATH_CHECKS.extend),
      renew: route(RenewRequest, (req) => renew(ctx, req), CALL_PATH_CHECKS.renew),
      settle: route(SettleRequest, (req) => settle(ctx, req), CALL_PATH_CHECKS.settle),
      release: route(ReleaseRequest, (req) => release(ctx, req), CALL_PATH_CHECKS.release),
    };
    for (const [op, r] of Object.entries(callPath)) {
      this.#serve(op as BatchedOperation, r.schema, r.handler, r.check);
    }
    this.#serveBatch(callPath);
    // Read-only: whether a count's tenant owns what it names (a call's admission checks it).
    this.#serve('owns', OwnsRequest, (req) => owns(ctx, req));
    this.#serve('usage', UsageRequest, (req) => usage(ctx, req));
    this.#serve('capacity.report', CapacityReportRequest, async (req) =>
      Ok({ recorded: await reportCapacity(ctx, req) }),
    );
    this.#serve('capacity.count', CapacityCountRequest, async (req) =>
      Ok(await takeCount(ctx, req)),
    );
    this.#serve('capacity.move', CapacityMoveRequest, async (req) => {
      const r = await withStore(ctx.logger, 'capacity.move', () => moveCapacity(ctx, req));
      return r.ok ? r.value : r;
    });
    this.#serve('capacity.retry', CapacityRetryRequest, async (req) => {
      const r = await withStore(ctx.logger, 'capacity.retry', () => takeRetry(ctx, req));
      return r.ok ? r.value : r;
    });
    this.#serve('refusals.report', RefusalsReportRequest, (req) => reportRefusals(ctx, req));
    this.#serve('suspend', SuspendRequest, (req) => setSuspension(ctx, { op: 'suspend', req }));
    this.#serve('resume', ResumeRequest, (req) => setSuspension(ctx, { op: 'resume', req }));
    // Always the stored version, not this replica's cache: a read-modify-write (admin API)
    // must start from the latest document or its apply is refused as stale.
    // Redis failing or timing out under them is budget_store_unavailable (retryable), not a bug.
    this.#serve('config.get', ConfigGetRequest, () =>
      withStore(ctx.logger, 'config.get', () => ctx.config.snapshot()),
    );
    this.#serve('config.apply', ConfigApplyRequest, async (req) => {
      const stored = await withStore(ctx.logger, 'config.apply', () =>
        ctx.config.apply(req.document, req.source, {
          expectedVersion: req.expectedVersion,
          mode: req.mode,
        }),
      );
      if (!stored.ok) return stored;
      const r = stored.value;
      if (r.ok && r.value.changed) this.#announceConfig();
      return r;
    });
    // A replica that applied a config tells the others at once; polling covers a lost notice.
    this.#subs.push(
      nc.subscribe(`${names.authorityPrefix}.config.changed`, {
        callback: () =>
          void this.ctx.config
            .refresh()
            .catch((err: unknown) =>
              logger.warn({ err: errorMessage(err) }, 'config refresh failed'),
            ),
      }),
    );
    this.#configPoll = every(this.#o.configPollMs ?? 2_000, () => this.ctx.config.refresh(), {
      logger,
      failed: 'config refresh failed',
    });
    if (this.#o.configFile) {
      watchFile(this.#o.configFile, { interval: 1_000 }, () => void this.reloadConfigFile());
    }
    this.#relay.start();
    this.#sweeper.start();
    this.#closes = new ClosesConsumer(
      this.ctx,
      nc,
      await jetstreamManager(nc),
      names,
      logger.child({ component: 'closes' }),
      streams.replicas,
      this.#o.closesPurgeEveryMs,
    );
    await this.#closes.start();
    // Edges retrying closes it could not take while it was away send them now (Holds.wake);
    // so do closes it could not take while its Redis was away, once the connection is back.
    this.#announceServing();
    this.#o.redis.on('ready', this.#announceServing);
    // And each time its NATS connection is back (its subscriptions are sent again first): an
    // edge that reconnected before it sends what it owes now, not a backoff step later.
    this.#stopReconnects = onReconnect(nc, this.#announceServing);
  }

  /**
   * Applies the config file (at start, when it changes, on SIGHUP) when it changed since it
   * was last applied, merged with what the admin API changed (ConfigStore.applyFile). Invalid
   * files are logged and ignored.
   */
  async reloadConfigFile(): Promise<void> {
    const file = this.#o.configFile;
    if (!file) return;
    const { logger } = this.#o;
    try {
      const r = await this.ctx.config.applyFile(file);
      if (!r.ok) {
        logger.error(
          { file, error: r.error.message },
          'config file rejected; keeping the current config',
        );
      } else if (r.value.skipped) {
        const { version, divergence } = await this.ctx.config.snapshot();
        logger.info(
          { file, appliedAt: r.value.appliedAt, version, adminChanges: divergence.slice(0, 50) },
          'config file unchanged since it was applied; serving the stored config',
        );
      } else if (r.value.changed) this.#announceConfig();
    } catch (err) {
      logger.error({ err, file }, 'config file could not be applied');
    }
  }

  /** Stops serving (drains subscriptions), then the relay and sweeper. */
  async stop(): Promise<void> {
    this.#o.redis.off('ready', this.#announceServing);
    this.#stopReconnects();
    await this.#configPoll?.stop();
    if (this.#o.configFile) unwatchFile(this.#o.configFile);
    await Promise.all(this.#subs.map((s) => s.drain().catch(() => undefined)));
    await this.#closes?.stop();
    await this.#sweeper.stop();
    await this.#relay.stop();
    this.#durable?.close();
  }

  /** Orgs whose outbox this replica relays and whose overdue holds it expires. */
  get relayedOrgs(): readonly string[] {
    return this.#relay.owned;
  }

  /** Runs one expiry pass now (the sweeper also runs on its interval); returns holds expired. */
  expireOverdue(): Promise<number> {
    return this.#sweeper.sweep();
  }

  /** True when Redis answers and a config is loaded. */
  async ready(): Promise<boolean> {
    return (await this.#o.redis.ping()) === 'PONG' && this.ctx.config.version > 0;
  }

  #announceConfig(): void {
    this.#o.nc.publish(
      `${this.#o.names.authorityPrefix}.config.changed`,
      String(this.ctx.config.version),
    );
  }

  /** A request answered, alone or in a batch: counted and timed by its operation. */
  #answered(op: AuthorityOperation, outcome: string, ms: number): void {
    this.ctx.metrics.requests.inc({ op, outcome });
    this.ctx.metrics.latency.observe({ op }, ms / 1_000);
  }

  /** The call path's operations in one message (an edge under load asks for many at once). */
  #serveBatch(routes: Record<BatchedOperation, Route>): void {
    const { metrics } = this.ctx;
    this.#subs.push(
      serveBatch(this.#o.nc, authoritySubject(this.#o.names, 'batch'), routes, {
        logger: this.#o.logger,
        onBatch: (size) => metrics.batchSize.observe(size),
        onDone: (op, outcome, ms) => this.#answered(op, outcome, ms),
      }),
    );
  }

  #serve<S extends z.ZodType>(
    op: AuthorityOperation,
    schema: S,
    handler: Handler<z.output<S>, unknown>,
    check?: (body: unknown) => boolean,
  ): void {
    this.#subs.push(
      serve(this.#o.nc, authoritySubject(this.#o.names, op), schema, handler, {
        logger: this.#o.logger,
        onDone: (outcome, ms) => this.#answered(op, outcome, ms),
        ...(check ? { check } : {}),
      }),
    );
  }

  /** Every hold sits in each level's set, the org's included: count the roots' sets. */
  async #countHolds(): Promise<number> {
    const { redis, keys, config } = this.ctx;
    const roots = [...config.current.tenants.values()].filter((t) => t.parent === undefined);
    const counts = await Promise.all(roots.map((t) => redis.zcard(keys.holds(t.org, t.id))));
    return counts.reduce((a, b) => a + b, 0);
  }

  async #countOutbox(): Promise<number> {
    const orgs = await this.ctx.config.orgs();
    const lens = await Promise.all(orgs.map((o) => this.ctx.redis.xlen(this.ctx.keys.outbox(o))));
    return lens.reduce((a, b) => a + b, 0);
  }
}

/** One operation's schema, handler and the schema's exact fast check, typed together. */
function route<S extends z.ZodType>(
  schema: S,
  handler: Handler<z.output<S>, unknown>,
  check: (body: unknown) => boolean,
): Route {
  return { schema, handler: handler as Handler<unknown, unknown>, check };
}
