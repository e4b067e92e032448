import { pino, type Logger, type LoggerOptions } from 'pino';

export type { Logger } from 'pino';

/**
 * Paths pino blanks out before a line is written. Secrets (virtual keys, provider keys,
 * webhook secrets, admin tokens) never reach a log line.
 */
export const REDACT_PATHS = [
  'authorization',
  'headers.authorization',
  'req.headers.authorization',
  'req.headers["x-admin-token"]',
  'req.headers.cookie',
  // Anthropic's clients and upstreams carry keys here.
  'headers["x-api-key"]',
  'req.headers["x-api-key"]',
  '*["x-api-key"]',
  '*.authorization',
  '*.apiKey',
  '*.secret',
  '*.token',
  '*.password',
  'apiKey',
  'secret',
  'token',
  'password',
];

export interface LoggerConfig {
  /** The service name, on every line. */
  name: string;
  level?: LoggerOptions['level'];
  /** Extra base fields (e.g. replica id). */
  base?: Record<string, unknown>;
}

export function createLogger(cfg: LoggerConfig): Logger {
  return pino({
    name: cfg.name,
    level: cfg.level ?? 'info',
    base: { pid: process.pid, ...cfg.base },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}
