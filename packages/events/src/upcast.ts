import { CURRENT_SCHEMA_VERSION } from './envelope.js';
import { Err, Ok, type Result } from './errors.js';

type Upcaster = (raw: Record<string, unknown>) => Record<string, unknown>;

/**
 * Upcasters from each old schema version to the next, applied on read so consumers only ever
 * see the current version. Version 1 is the first; add `1: (v1) => v2` when version 2 ships.
 */
const UPCASTERS: Record<number, Upcaster> = {};

/**
 * Why an event read from the wire was refused. A plain object, not a BaseError: every message
 * of a stream goes through the parse, and a poison one only needs its code and reason.
 */
export interface EventError {
  code: 'invalid_json' | 'not_an_object' | 'unsupported_version' | 'invalid_event';
  message: string;
}

export function upcast(raw: unknown): Result<Record<string, unknown>, EventError> {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    return Err({ code: 'not_an_object', message: 'event is not a JSON object' });
  }
  let event = raw as Record<string, unknown>;
  let version = event.schemaVersion;
  while (typeof version === 'number' && version < CURRENT_SCHEMA_VERSION) {
    const step = UPCASTERS[version];
    if (!step)
      return Err({
        code: 'unsupported_version',
        message: `no upcaster from schemaVersion ${version}`,
      });
    event = step(event);
    version = event.schemaVersion;
  }
  if (version !== CURRENT_SCHEMA_VERSION) {
    return Err({
      code: 'unsupported_version',
      message: `unsupported schemaVersion ${String(version)}`,
    });
  }
  return Ok(event);
}
