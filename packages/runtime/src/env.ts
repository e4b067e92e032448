import { env, natsNames, natsNamesEnv, parseEnv } from '@holdfast/config';
import type { NatsNames } from '@holdfast/events';
import { z } from 'zod';

/**
 * What every service reads, whatever else it reads: the NATS servers, the stream and subject
 * names, the replicas of the streams it creates, the log level. Each service spreads this into
 * its own schema with `serviceEnv({...})`, so two services cannot parse one variable two ways.
 */
const sharedEnv = {
  /** One server or a comma-separated list; the client gets them all and moves on when one is lost. */
  NATS_URL: env.natsServers(),
  /**
   * Replicas of the streams and KV buckets a service creates (1; 3 on a 3-node NATS cluster).
   * An existing stream keeps the replicas it has.
   */
  HOLDFAST_STREAM_REPLICAS: env.int(1, 1, 5),
  LOG_LEVEL: env.logLevel(),
  ...natsNamesEnv,
};

/** A service's schema: the shared variables plus its own (its own may override a default). */
export function serviceEnv<S extends z.ZodRawShape>(own: S) {
  return z.object({ ...sharedEnv, ...own });
}

type SharedEnv = z.infer<z.ZodObject<typeof sharedEnv>>;

/** The part of every service's loaded config that comes from the shared variables. */
export interface ServiceConfig {
  nats: {
    servers: string[];
    names: NatsNames;
    /** Replicas of the streams this service creates. */
    replicas: number;
  };
  logLevel: SharedEnv['LOG_LEVEL'];
  /** Port of /healthz, /readyz and /metrics (the edge: its API port). */
  opsPort: number;
}

/**
 * The one shape of a service's `loadConfig(env)`: parse (an EnvError names each bad variable),
 * then build the service's config on top of the shared part.
 */
export function loadServiceConfig<S extends z.ZodType<SharedEnv>, C>(
  schema: S,
  source: NodeJS.ProcessEnv,
  build: (e: z.infer<S>) => C & { opsPort: number },
): ServiceConfig & C & { env: z.infer<S> } {
  const e = parseEnv(schema, source);
  const own = build(e);
  return {
    env: e,
    nats: { servers: e.NATS_URL, names: natsNames(e), replicas: e.HOLDFAST_STREAM_REPLICAS },
    logLevel: e.LOG_LEVEL,
    ...own,
  };
}
