import {
  AuthorityClient,
  connectNats,
  createRegistry,
  DeadLetters,
  ensureEventsStream,
  startOpsServer,
  startParts,
  stopInReverse,
  type Started,
} from '@holdfast/runtime';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { Logger } from '@holdfast/runtime';
import type { Registry } from 'prom-client';
import { startAuditJob } from './audit-job.js';
import { Batcher } from './batcher.js';
import { createClickHouse } from './clickhouse.js';
import type { AggregatorConfig } from './env.js';
import { createEventConsumer, ensureConsumer, REDELIVER } from './consumer.js';
import { HealthGate } from './health-gate.js';
import { startLagPoller } from './lag.js';
import { createMetrics } from './metrics.js';
import { migrateWhenReachable } from './migrate.js';
import { BatchCommit, CONSUMER_NAME, type Pending } from './batch-commit.js';
import { createEventsWriter } from './writer.js';

export interface AggregatorDeps {
  logger: Logger;
  /** Where metrics go; the ops server serves it. Default: a new registry. */
  registry?: Registry;
  /** Silence the ClickHouse client's own error lines (tests). */
  quietClickHouse?: boolean;
}

/**
 * Starts the aggregator: NATS and the events stream, ClickHouse and its migrations, the
 * consume -> batch -> insert -> ack pipeline, the lag poller and the audit job. Parts stop in
 * reverse start order (the pipeline flushes what it took before ClickHouse and NATS close).
 */
export function start(config: AggregatorConfig, deps: AggregatorDeps): Promise<Started> {
  const { logger } = deps;
  const registry = deps.registry ?? createRegistry('billing-aggregator');
  const metrics = createMetrics(registry);
  return startParts(logger, async (components) => {
    const nc = await connectNats({
      servers: config.nats.servers,
      name: 'billing-aggregator',
      logger,
    });
    components.push({ name: 'nats', stop: () => nc.drain() });
    const jsm = await jetstreamManager(nc);
    const js = jetstream(nc);
    await ensureEventsStream(jsm, config.nats.names, { replicas: config.nats.replicas, logger });
    const settings = config.consumer;
    await ensureConsumer(jsm, config.nats.names, settings);

    const ch = createClickHouse({ ...config.clickhouse, quiet: deps.quietClickHouse });
    components.push({ name: 'clickhouse', stop: () => ch.close() });
    const { database } = config.clickhouse;
    await migrateWhenReachable({ ch, database, logger });

    const gate = new HealthGate({
      probe: () => ch.ping(),
      logger,
      onChange: (up) => metrics.clickhouseUp.set(up ? 1 : 0),
    });
    const commit = new BatchCommit({
      deadLetters: new DeadLetters({
        nc,
        names: config.nats.names,
        service: 'billing-aggregator',
        source: CONSUMER_NAME,
        logger,
        redeliver: REDELIVER,
      }),
      writer: createEventsWriter({ ch, database }),
      gate,
      metrics,
      logger,
      ackWaitMs: config.consumer.ackWaitMs,
    });
    const batcher = new Batcher<Pending>({
      maxItems: config.batch.maxRows,
      maxWaitMs: config.batch.maxWaitMs,
      flush: (items) => commit.flush(items),
      logger,
    });
    const consumer = createEventConsumer({
      nc,
      js,
      jsm,
      names: config.nats.names,
      settings,
      logger,
      held: function* (minAgeMs) {
        for (const p of batcher.held(minAgeMs)) yield p.msg;
      },
      onMessage: (msg) => {
        const pending = commit.accept(msg);
        if (pending instanceof Promise) return pending;
        if (!gate.isOpen) return gate.wait().then(() => batcher.add(pending));
        return batcher.add(pending);
      },
    });
    components.push({
      name: 'pipeline',
      stop: async () => {
        gate.stop();
        // The batches taken are inserted (and kept alive) before the consumer is done.
        await consumer.stop(() => batcher.drain());
      },
    });
    await consumer.start();

    components.push({
      name: 'lag',
      ...startLagPoller({
        jsm,
        stream: config.nats.names.eventsStream,
        durable: config.consumer.durable,
        metrics,
        logger,
      }),
    });
    if (config.audit.intervalMs > 0) {
      const authority = new AuthorityClient({ nc, names: config.nats.names });
      components.push({
        name: 'audit',
        ...startAuditJob({
          ch,
          database,
          authority,
          ...config.audit,
          settleMs: 2 * config.batch.maxWaitMs + 2_000,
          metrics,
          logger,
        }),
      });
    }
    return {
      checks: [
        { name: 'nats', check: () => !nc.isClosed() },
        { name: 'clickhouse', check: () => ch.ping() },
        { name: 'consumer', check: () => consumer.consuming },
      ],
    };
  });
}

export interface AggregatorOptions extends AggregatorDeps {
  config: AggregatorConfig;
}

export interface Aggregator extends Started {
  /** The ops server's port (useful when the config asked for port 0). */
  opsPort: number;
  registry: Registry;
}

/** `start` plus its ops server, in-process (tests, the local stack, benchmarks). */
export async function startAggregator(opts: AggregatorOptions): Promise<Aggregator> {
  const { config, logger } = opts;
  const registry = opts.registry ?? createRegistry('billing-aggregator');
  const service = await start(config, { ...opts, registry });
  const ops = await startOpsServer({
    port: config.opsPort,
    logger,
    registry,
    checks: service.checks,
  }).catch(async (err: unknown) => {
    await service.stop();
    throw err;
  });
  return {
    opsPort: ops.port,
    registry,
    checks: service.checks,
    stop: () =>
      stopInReverse(logger, [
        { name: 'aggregator', stop: () => service.stop() },
        { name: 'ops', stop: ops.stop },
      ]),
  };
}
