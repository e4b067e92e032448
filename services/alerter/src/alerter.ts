import type { CompiledConfig } from '@holdfast/config';
import {
  ensureEventsStream,
  AuthorityClient,
  DeadLetters,
  errorMessage,
  startParts,
  type Logger,
  type Started,
} from '@holdfast/runtime';
import type { HoldfastEvent, NatsNames } from '@holdfast/events';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import { BurnMonitor } from './burn-monitor.js';
import { alerterNames, DEFAULT_SETTINGS, type AlerterSettings } from './env.js';
import { EventConsumer } from './consumer.js';
import { ConfigSource, missingSecrets } from './holdfast-config.js';
import { createMetrics } from './metrics.js';
import { EventPublisher } from './publisher.js';
import { StateStore } from './state-store.js';
import { SuspensionController } from './suspension.js';
import { DeliveryWorker } from './webhook/deliver.js';
import { DeliveryLog } from './webhook/log.js';
import { ensureWebhookStreams, webhookAckWaitMs, WebhookQueue } from './webhook/queue.js';
import { chargedBy } from './thresholds.js';
import { WindowTracker, type Snapshot } from './window-tracker.js';

export interface AlerterOptions {
  nc: NatsConnection;
  names: NatsNames;
  /** The Holdfast config at start. */
  config: CompiledConfig;
  /** true: re-read the config from the authority after each `config.changed` event. */
  configFromAuthority?: boolean;
  logger: Logger;
  /** Where metrics go; a private registry when absent. */
  registry?: Registry;
  settings?: Partial<AlerterSettings>;
  /** Where webhook secrets are read (`secretEnv`); process.env by default. */
  secrets?: NodeJS.ProcessEnv;
}

/** A running alerter: `stop` stops its parts in reverse start order, each with a deadline. */
export type Alerter = Started;

/**
 * Events whose `windows` are the authority's state after a change: every event that carries
 * windows except the alerter's own (which copy the windows of the event that caused them).
 */
const ALERTER_EVENTS = new Set<HoldfastEvent['type']>([
  'threshold.crossed',
  'budget.exhaustion_projected',
]);

/**
 * Starts one alerter replica: webhook delivery first (so jobs queued by the consumer go out),
 * then the burn monitor and the usage poller, then the events consumer. `stop()` runs in
 * reverse: no new events, then the pollers flush, then deliveries in flight finish.
 */
export async function startAlerter(opts: AlerterOptions): Promise<Alerter> {
  const { nc, names, logger } = opts;
  const settings: AlerterSettings = { ...DEFAULT_SETTINGS, ...opts.settings };
  const secrets = opts.secrets ?? process.env;
  const missing = missingSecrets(opts.config, secrets);
  if (missing.length > 0) {
    throw new Error(
      `webhook secrets missing from the environment: ${missing.map((m) => `${m.webhook} (${m.secretEnv})`).join(', ')}`,
    );
  }
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  const own = alerterNames(names);
  const streams = { replicas: settings.streamReplicas, logger };
  await ensureEventsStream(jsm, names, streams);
  await ensureWebhookStreams(jsm, own, settings, streams);
  const store = await StateStore.open(nc, own.stateBucket, streams);
  await store.mirror('win.');
  const metrics = createMetrics(opts.registry ?? new Registry());
  const authority = new AuthorityClient({ nc, names });
  const config = new ConfigSource({
    config: opts.config,
    authority: opts.configFromAuthority ? authority : undefined,
    logger,
    metrics,
  });
  const publisher = new EventPublisher({ js, names });
  const suspension = new SuspensionController({
    authority,
    store,
    logger,
    metrics,
    pollMs: settings.usagePollMs,
  });
  const queue = new WebhookQueue({ js, names: own, config });
  const tracker = new WindowTracker({
    store,
    sink: {
      // Its webhook jobs are queued at once, not when a pull brings the event back (a burst
      // later): that copy's jobs have the same msg ids, which the queue drops.
      publish: async (e) => void (await queue.enqueue(await publisher.publish(e))),
      suspend: (r) => suspension.suspend(r),
    },
    config,
    logger,
    metrics,
  });
  const burn = new BurnMonitor({
    store,
    tracker,
    config,
    logger,
    metrics,
    lookbackMs: settings.burnLookbackMs,
    flushMs: settings.burnFlushMs,
  });
  const deliverer = new DeliveryWorker({
    nc,
    js,
    jsm,
    names: own,
    config,
    settings,
    logger,
    metrics,
    log: new DeliveryLog({ js, names: own }),
    deadLetters: new DeadLetters({
      nc,
      names,
      service: 'alerter',
      source: 'alerter-webhooks',
      logger,
      ackWaitMs: webhookAckWaitMs(settings),
    }),
    secrets,
  });

  // The events consumer hands `config.changed` to one replica only: every replica also takes
  // the authority's notice of a new config, so none goes on with the old thresholds.
  const notices = opts.configFromAuthority
    ? nc.subscribe(`${names.authorityPrefix}.config.changed`, {
        callback: () =>
          void config
            .reload()
            .catch((err: unknown) =>
              logger.warn({ err: errorMessage(err) }, 'config reload on notice failed'),
            ),
      })
    : undefined;

  /** The windows an authority event shows (ALERTER_EVENTS: none), with their state before it. */
  const snapshotsOf = (event: HoldfastEvent, seq: number): Snapshot[] => {
    if (ALERTER_EVENTS.has(event.type) || !('windows' in event)) return [];
    // The team's and org's windows; a key's or an end user's budget alerts nobody (yet) and
    // never suspends the team, and a window a close lists that the tenant's plan no longer
    // has (`removed`: no limit) is no budget to alert or suspend on.
    return event.windows
      .filter((w) => w.scope === undefined)
      .map((window) => ({
        window,
        before: window.used - chargedBy(event, window),
        position: { time: event.time, seq },
        cause: { eventId: event.id, time: event.time, org: event.org, windows: event.windows },
      }));
  };
  const observeAll = (event: HoldfastEvent, seq: number): Promise<void> | undefined => {
    const snapshots = snapshotsOf(event, seq);
    let waits: Promise<void>[] | undefined;
    for (const s of snapshots) {
      const wait = tracker.observe(s);
      if (wait) (waits ??= []).push(wait);
    }
    if (!waits) {
      burn.add(event, snapshots);
      return undefined;
    }
    return Promise.all(waits).then(() => burn.add(event, snapshots));
  };
  /**
   * One event, after its org's earlier ones: a new config, a suspension's record, then its
   * windows. No promise when none of that needs a round trip (issue 14: most events, whose
   * windows the state mirror decides), so the consumer acks it in the same turn.
   */
  const handle = (event: HoldfastEvent, seq: number): Promise<void> | undefined => {
    const slow =
      event.type === 'config.changed' ||
      event.type === 'tenant.suspended' ||
      event.type === 'tenant.resumed';
    if (!slow) return observeAll(event, seq);
    return (async () => {
      if (event.type === 'config.changed') await config.reload();
      else await suspension.record(event);
      await observeAll(event, seq);
    })();
  };
  /**
   * Its webhook jobs, queued as the event is taken: a job's place in the queue is no order
   * (deliveries run side by side and retries reorder them), and a busy org's events then share
   * their publishes' round trips instead of waiting for each other's (webhook.backlog).
   */
  const enqueue = (event: HoldfastEvent): Promise<void> | undefined =>
    queue.wants(event) ? queue.enqueue(event).then(() => undefined) : undefined;
  const consumer = new EventConsumer({
    nc,
    js,
    jsm,
    names,
    settings,
    logger,
    metrics,
    handler: handle,
    unordered: enqueue,
  });

  // Stopped in reverse: no new events, then the pollers flush, then deliveries in flight
  // finish, then the state mirror.
  return startParts(logger, async (parts) => {
    parts.push({ name: 'state-store', stop: () => store.stop() });
    if (notices) parts.push({ name: 'config-notices', stop: () => notices.unsubscribe() });
    await deliverer.start();
    parts.push({ name: 'webhook-deliverer', stop: () => deliverer.stop() });
    // A webhook the new config adds has its consumer before its first job is delivered.
    config.onChange(() => {
      deliverer
        .sync()
        .catch((err: unknown) =>
          logger.warn({ err: errorMessage(err) }, 'webhook consumers not synced'),
        );
    });
    burn.start();
    parts.push({ name: 'burn-monitor', stop: () => burn.stop() });
    suspension.start();
    parts.push({ name: 'suspension', stop: () => suspension.stop() });
    await consumer.start();
    parts.push({ name: 'events-consumer', stop: () => consumer.stop() });
    logger.info({ ...own, consumer: settings.consumer }, 'alerter started');
    return {
      checks: [
        { name: 'nats', check: () => !nc.isClosed() },
        { name: 'events-consumer', check: () => consumer.consuming },
        { name: 'webhook-deliverer', check: () => deliverer.consuming },
      ],
    };
  });
}
