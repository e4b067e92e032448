import {
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type JetStreamManager,
} from '@nats-io/jetstream';
import { connect, nanos, type NatsConnection, type Status } from '@nats-io/transport-node';
import { closesStream, deadLetterStream, type NatsNames } from '@holdfast/events';
import type { Logger } from 'pino';

export interface NatsConnectOptions {
  /** Every server of the cluster (or a comma-separated string of them). */
  servers: string | readonly string[];
  /** Client name, shown by `nats server report connections`. */
  name: string;
  logger: Logger;
  /**
   * Skip the stack capture nats.js does for every request (an Error built per call, so a
   * timeout shows the caller's stack). Hot request paths (the edge's admit) turn it off.
   */
  noAsyncTraces?: boolean;
}

/**
 * Connects with endless reconnects (a service outlives a NATS restart) and logs every status
 * change. Given every server of a cluster, the client moves to another when its server is lost
 * (it also learns the others from the server it reached). The caller owns the connection and
 * drains it on shutdown.
 */
export async function connectNats(opts: NatsConnectOptions): Promise<NatsConnection> {
  const nc = await connect({
    servers: typeof opts.servers === 'string' ? opts.servers.split(',') : [...opts.servers],
    name: opts.name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    pingInterval: 10_000,
    noAsyncTraces: opts.noAsyncTraces ?? false,
  });
  opts.logger.info({ server: nc.getServer() }, 'connected to NATS');
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'ping') continue;
      const level = s.type === 'error' || s.type === 'disconnect' ? 'warn' : 'info';
      opts.logger[level]({ status: s.type }, 'NATS status');
    }
  })();
  return nc;
}

/**
 * Calls `fn` each time the connection is back after a loss (its `reconnect` status, sent once
 * its subscriptions are registered again), until the returned stop is called or the
 * connection closes.
 */
export function onReconnect(nc: NatsConnection, fn: () => void): () => void {
  // The iterator nats.js returns has `stop`; its declared type does not say so.
  const statuses: AsyncIterable<Status> & { stop?: () => void } = nc.status();
  void (async () => {
    for await (const s of statuses) if (s.type === 'reconnect') fn();
  })();
  return () => statuses.stop?.();
}

/**
 * How long a publish, a KV read or a KV write on a hot path waits for its answer. The
 * JetStream client's default, 5 s, is far above an answer on a healthy cluster (milliseconds)
 * and is what a request in flight to a server or stream leader that was killed costs before
 * it can be sent again (a retried publish keeps its Nats-Msg-Id: deduplicated).
 */
export const JETSTREAM_OP_TIMEOUT_MS = 2_000;

/** How long JetStream remembers a Nats-Msg-Id; a relay republishing within it is deduplicated. */
const EVENTS_DUPLICATE_WINDOW_MS = 10 * 60_000;

/**
 * Creates the events stream and the dead-letter stream, or updates them to the expected
 * config. Idempotent, so every service that depends on them calls it at start.
 */
export async function ensureEventsStream(
  jsm: JetStreamManager,
  names: NatsNames,
  opts: StreamOptions & { maxAgeMs?: number } = {},
): Promise<void> {
  const common = {
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    duplicate_window: nanos(EVENTS_DUPLICATE_WINDOW_MS),
    num_replicas: opts.replicas ?? 1,
  };
  await ensureStream(
    jsm,
    {
      ...common,
      name: names.eventsStream,
      subjects: [`${names.eventsPrefix}.>`],
      max_age: nanos(opts.maxAgeMs ?? 0),
    },
    opts.logger,
  );
  // Dead letters are kept 30 days: long enough to look at and replay them.
  await ensureStream(
    jsm,
    { ...common, ...deadLetterStream(names), max_age: nanos(30 * 86_400_000) },
    opts.logger,
  );
}

/**
 * Creates the closes stream (settles and releases waiting for the authority): a work queue,
 * so each one is removed once the authority applied it. Idempotent; the edge and the
 * authority both call it at start.
 */
export async function ensureClosesStream(
  jsm: JetStreamManager,
  names: NatsNames,
  opts: StreamOptions = {},
): Promise<void> {
  await ensureStream(
    jsm,
    {
      ...closesStream(names),
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
      duplicate_window: nanos(EVENTS_DUPLICATE_WINDOW_MS),
      num_replicas: opts.replicas ?? 1,
    },
    opts.logger,
  );
}

export interface StreamOptions {
  /** Replicas of a stream this call creates (HOLDFAST_STREAM_REPLICAS); default 1. */
  replicas?: number;
  /** Told when an existing stream has other replicas than configured. */
  logger?: Logger;
}

/**
 * Creates a stream, or makes an existing one cover our subjects and dedupe window. Settings an
 * operator chose for an existing stream (replicas, retention, limits) are left alone, so a
 * service start never turns an R3 stream back into R1 (nor R1 into R3 behind their back: that
 * is `nats stream edit --replicas`).
 */
export async function ensureStream(
  jsm: JetStreamManager,
  config: Parameters<JetStreamManager['streams']['add']>[0] & { name: string; subjects: string[] },
  logger?: Logger,
): Promise<void> {
  let current;
  try {
    current = (await jsm.streams.info(config.name)).config;
  } catch (err) {
    if (!(err instanceof JetStreamApiError) || err.code !== JetStreamApiCodes.StreamNotFound) {
      throw err;
    }
    try {
      await jsm.streams.add(config);
      return;
    } catch (addErr) {
      // Another process made it between our look and our add (replicas starting together:
      // the server may then answer "subjects overlap"); take it as it is, or fail as we did.
      current = (
        await jsm.streams.info(config.name).catch(() => {
          throw addErr;
        })
      ).config;
    }
  }
  warnOnReplicas(logger, config.name, current.num_replicas, config.num_replicas ?? 1);
  const subjects = [...new Set([...current.subjects, ...config.subjects])];
  const window = Math.max(current.duplicate_window, config.duplicate_window ?? 0);
  if (subjects.length !== current.subjects.length || window !== current.duplicate_window) {
    await jsm.streams.update(config.name, { ...current, subjects, duplicate_window: window });
  }
}

/** An existing stream or bucket keeps its replicas; say so when they are not the configured. */
export function warnOnReplicas(
  logger: Logger | undefined,
  stream: string,
  has: number,
  configured: number,
): void {
  if (has === configured) return;
  logger?.warn(
    { stream, replicas: has, configured },
    'existing stream keeps its replicas (HOLDFAST_STREAM_REPLICAS applies to new streams)',
  );
}
