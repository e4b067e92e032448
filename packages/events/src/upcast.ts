import { CURRENT_SCHEMA_VERSION } from './envelope.js';

type Upcaster = (raw: Record<string, unknown>) => Record<string, unknown>;

/**
 * Upcasters from each old schema version to the next, applied on read so consumers only ever
 * see the current version. Version 1 is the first; add `1: (v1) => v2` when version 2 ships.
 */
const UPCASTERS: Record<number, Upcaster> = {};

export function upcast(
  raw: unknown,
): { ok: true; value: Record<string, unknown> } | { ok: false; error: string } {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    return { ok: false, error: 'event is not a JSON object' };
  }
  let event = raw as Record<string, unknown>;
  let version = event.schemaVersion;
  while (typeof version === 'number' && version < CURRENT_SCHEMA_VERSION) {
    const step = UPCASTERS[version];
    if (!step) return { ok: false, error: `no upcaster from schemaVersion ${version}` };
    event = step(event);
    version = event.schemaVersion;
  }
  if (version !== CURRENT_SCHEMA_VERSION) {
    return { ok: false, error: `unsupported schemaVersion ${String(version)}` };
  }
  return { ok: true, value: event };
}
