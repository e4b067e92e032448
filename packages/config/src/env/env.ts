import { BaseError, type NatsNames } from '@holdfast/events';
import { z } from 'zod';
import { formatIssues } from '../document/load.js';

/**
 * zod helpers for service environment variables. Each service declares one schema built from
 * these and calls `parseEnv(schema, process.env)` from its main; nothing parses at import.
 */
export const env = {
  port: (fallback: number) => z.coerce.number().int().min(0).max(65_535).default(fallback),
  int: (fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER) =>
    z.coerce.number().int().min(min).max(max).default(fallback),
  url: (fallback?: string) => (fallback === undefined ? z.url() : z.url().default(fallback)),
  bool: (fallback: boolean) =>
    z
      .enum(['true', 'false', '1', '0', 'yes', 'no'])
      .default(fallback ? 'true' : 'false')
      .transform((v) => v === 'true' || v === '1' || v === 'yes'),
  string: (fallback: string) => z.string().min(1).default(fallback),
  logLevel: () =>
    z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** NATS servers: one URL or a comma-separated list (`nats://a:4222,nats://b:4222`). */
  natsServers: (fallback = 'nats://127.0.0.1:4222') =>
    z
      .string()
      .min(1)
      .default(fallback)
      .transform((v) =>
        v
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
      )
      .refine(
        (list) => list.length > 0 && list.every(isNatsUrl),
        'must be one or more comma-separated nats:// URLs',
      ),
};

const NATS_SCHEMES = new Set(['nats:', 'tls:', 'ws:', 'wss:']);

function isNatsUrl(s: string): boolean {
  try {
    return NATS_SCHEMES.has(new URL(s).protocol);
  } catch {
    return false;
  }
}

export class EnvError extends BaseError<'invalid_environment'> {
  constructor(readonly errors: string[]) {
    super({
      code: 'invalid_environment',
      message: `invalid environment:\n  ${errors.join('\n  ')}`,
    });
  }
}

/** Parses the environment against a service's schema; throws an EnvError naming each variable. */
export function parseEnv<S extends z.ZodType>(schema: S, source: NodeJS.ProcessEnv): z.infer<S> {
  const parsed = schema.safeParse(source);
  if (!parsed.success) throw new EnvError(formatIssues(parsed.error.issues));
  return parsed.data;
}

const subjectPrefix = z
  .string()
  .regex(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/, 'must be dot-separated tokens without wildcards');

/**
 * The NATS names every service reads from its environment, so tests and parallel deployments
 * can share one NATS server. Spread into a service's env schema, then call `natsNames(env)`.
 */
export const natsNamesEnv = {
  /** JetStream stream holding every event. */
  HOLDFAST_EVENTS_STREAM: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/)
    .default('HOLDFAST_EVENTS'),
  /** Events are published on `<prefix>.<tenant>.<type>`. */
  HOLDFAST_EVENTS_PREFIX: subjectPrefix.default('holdfast.events'),
  /** The authority answers on `<prefix>.<operation>`. */
  HOLDFAST_AUTHORITY_PREFIX: subjectPrefix.default('holdfast.authority.v1'),
};

export function natsNames(e: {
  HOLDFAST_EVENTS_STREAM: string;
  HOLDFAST_EVENTS_PREFIX: string;
  HOLDFAST_AUTHORITY_PREFIX: string;
}): NatsNames {
  return {
    eventsStream: e.HOLDFAST_EVENTS_STREAM,
    eventsPrefix: e.HOLDFAST_EVENTS_PREFIX,
    authorityPrefix: e.HOLDFAST_AUTHORITY_PREFIX,
  };
}

/** Env vars of a NatsNames, for starting a child process with isolated names. */
export function natsNamesToEnv(names: NatsNames): Record<string, string> {
  return {
    HOLDFAST_EVENTS_STREAM: names.eventsStream,
    HOLDFAST_EVENTS_PREFIX: names.eventsPrefix,
    HOLDFAST_AUTHORITY_PREFIX: names.authorityPrefix,
  };
}
