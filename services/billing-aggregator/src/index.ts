import {
  AuthorityClient,
  connectNats,
  createRegistry,
  DeadLetters,
  ensureEventsStream,
  startOpsServer,
  stopAll,
  type Stoppable,
} from '@holdfast/runtime';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { Logger } from '@holdfast/runtime';
import type { Registry } from 'prom-client';
import { startAuditJob } from './audit-job.js';
import { Batcher } from './batcher.js';
import { createClickHouse } from './clickhouse.js';
import type { AggregatorConfig } from './config.js';
import { createEventConsumer, ensureConsumer, REDELIVER } from './consumer.js';
import { HealthGate } from './health-gate.js';
import { startLagPoller } from './lag.js';
import { createMetrics } from './metrics.js';
import { migrateWhenReachable } from './migrate.js';
import { CONSUMER_NAME, EventSink, type Pending } from './sink.js';
import { createEventsWriter } from './writer.js';

export { loadConfig, type AggregatorConfig } from './config.js';
export { migrate, loadMigrations, render } from './migrate.js';
export { createClickHouse, type SqlExecutor } from './clickhouse.js';
export { runAudit, compare, exceeds, type AuditReport, type DriftRow } from './audit.js';
export { toEventRow, EventRow } from './rows.js';
export { sql, lit, ident, qualified, raw, tuple, Sql, SqlError } from './sql.js';
export { CONSUMER_NAME } from './sink.js';

export interface AggregatorOptions {
  config: AggregatorConfig;
  logger: Logger;
  registry?: Registry;
  /** Silence the ClickHouse client's own error lines (tests). */
  quietClickHouse?: boolean;
}

export interface Aggregator {
  /** The ops server's port (useful when the config asked for port 0). */
  opsPort: number;
  registry: Registry;
  /** Stops consuming, flushes what was taken, then closes ClickHouse and NATS. */
  stop(): Promise<void>;
}

/**
 * Starts the aggregator: NATS and the events stream, ClickHouse and its migrations, the
 * consume -> batch -> insert -> ack pipeline, the ops server, the lag poller and the audit
 * job. Components stop in reverse start order.
 */
export async function startAggregator(opts: AggregatorOptions): Promise<Aggregator> {
  const { config, logger } = opts;
  const registry = opts.registry ?? createRegistry('billing-aggregator');
  const metrics = createMetrics(registry);
  const components: Stoppable[] = [];
  try {
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

    const ch = createClickHouse({ ...config.clickhouse, quiet: opts.quietClickHouse });
    components.push({ name: 'clickhouse', stop: () => ch.close() });
    const { database } = config.clickhouse;
    await migrateWhenReachable({ ch, database, logger });

    const gate = new HealthGate({
      probe: () => ch.ping(),
      logger,
      onChange: (up) => metrics.clickhouseUp.set(up ? 1 : 0),
    });
    const sink = new EventSink({
      deadLetters: new DeadLetters({
        js,
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
      flush: (items) => sink.flush(items),
      logger,
    });
    const consumer = createEventConsumer({
      js,
      jsm,
      names: config.nats.names,
      settings,
      logger,
      onMessage: (msg) => {
        const pending = sink.accept(msg);
        if (pending instanceof Promise) return pending;
        if (!gate.isOpen) return gate.wait().then(() => batcher.add(pending));
        return batcher.add(pending);
      },
    });
    components.push({
      name: 'pipeline',
      stop: async () => {
        gate.stop();
        await consumer.stop();
        await batcher.drain();
      },
    });
    await consumer.start();

    const ops = await startOpsServer({
      port: config.opsPort,
      logger,
      registry,
      checks: [
        { name: 'nats', check: () => !nc.isClosed() },
        { name: 'clickhouse', check: () => ch.ping() },
        { name: 'consumer', check: () => consumer.consuming },
      ],
    });
    components.push({ name: 'ops', stop: ops.stop });
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
      opsPort: ops.port,
      registry,
      stop: async () => {
        const clean = await stopAll(logger, components);
        if (!clean) throw new Error('aggregator did not stop cleanly (see log)');
      },
    };
  } catch (err) {
    await stopAll(logger, components);
    throw err;
  }
}
