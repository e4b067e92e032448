import { env as envVar } from '@holdfast/config';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { DEFAULT_NAMES } from '@holdfast/events';
import { CliError } from './client.js';
import type { LocalStack } from './context.js';
import { EXIT } from './exit.js';

/** Where the commands that read JetStream (`events`, `dead-letters`) connect and read. */
export interface NatsTarget {
  servers: string[];
  /** The events stream; its dead letters are `<stream>_DEADLETTER`. */
  stream: string;
  /** The events' subject prefix. */
  prefix: string;
}

/**
 * NATS from --nats, else NATS_URL, else the running stack's, else localhost; the stream and
 * subject prefix from HOLDFAST_EVENTS_*, else the stack's names, else the defaults.
 */
export function natsTarget(
  nats: string | undefined,
  env: NodeJS.ProcessEnv,
  stack: LocalStack,
): NatsTarget {
  const names = stack.state?.natsNames ?? {};
  // The services' own parser: one server or a comma-separated list.
  const servers = envVar
    .natsServers()
    .safeParse(nats ?? (env.NATS_URL || stack.state?.urls.nats || undefined));
  if (!servers.success) {
    throw new CliError(
      `${nats === undefined ? 'NATS_URL' : '--nats'}: must be one or more comma-separated nats:// URLs`,
      EXIT.usage,
    );
  }
  return {
    servers: servers.data,
    stream:
      env.HOLDFAST_EVENTS_STREAM || names.HOLDFAST_EVENTS_STREAM || DEFAULT_NAMES.eventsStream,
    prefix:
      env.HOLDFAST_EVENTS_PREFIX || names.HOLDFAST_EVENTS_PREFIX || DEFAULT_NAMES.eventsPrefix,
  };
}

/** Connects to the target's servers; one that cannot be reached is exit 7 (unavailable). */
export async function connectTo(servers: string[], name: string): Promise<NatsConnection> {
  try {
    return await connect({ servers, name });
  } catch (err) {
    throw new CliError(
      `cannot reach NATS at ${servers.join(',')} (${(err as Error).message})`,
      EXIT.unavailable,
    );
  }
}
