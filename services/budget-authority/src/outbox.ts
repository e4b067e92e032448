import {
  CURRENT_SCHEMA_VERSION,
  isoTime,
  HoldfastEvent,
  checkEvent,
  type RefusalCode,
} from '@holdfast/events';
import type { CompiledConfig } from '@holdfast/config';
import type { z } from 'zod';
import { refusalMessage, shrinkFacts } from './messages.js';
import { parseWindows } from './windows.js';

type Kind = 'number' | 'time' | 'boolean' | 'windows' | 'string';
interface FieldKind {
  kind: Kind;
  nullable: boolean;
}

/**
 * How to read each field of each event type from the outbox's flat strings, derived from the
 * event schemas themselves so a new field cannot be forgotten here.
 */
const FIELD_KINDS: Map<string, Map<string, FieldKind>> = new Map(
  HoldfastEvent.options.map((schema) => {
    const fields = new Map<string, FieldKind>();
    for (const [name, field] of Object.entries(schema.shape as Record<string, z.ZodType>)) {
      let def = field._zod.def as { type: string; innerType?: z.ZodType; format?: string };
      // A field with a default (added to a v1 event later) is read as its inner type.
      while ((def.type === 'default' || def.type === 'optional') && def.innerType) {
        def = def.innerType._zod.def;
      }
      const nullable = def.type === 'nullable';
      if (nullable && def.innerType) def = def.innerType._zod.def;
      const kind: Kind =
        def.type === 'number'
          ? 'number'
          : def.type === 'boolean'
            ? 'boolean'
            : def.type === 'array'
              ? 'windows'
              : def.format === 'datetime'
                ? 'time'
                : 'string';
      fields.set(name, { kind, nullable });
    }
    return [String(schema.shape.type.value), fields];
  }),
);

function decodeValue(value: string, f: FieldKind | undefined): unknown {
  if (!f) return value;
  // Scripts write '' for null, and -1 for a nullable count that has no value (retry-after).
  if (f.nullable && (value === '' || (f.kind === 'number' && Number(value) < 0))) return null;
  switch (f.kind) {
    case 'number':
      return Number(value);
    case 'time':
      return isoTime(Number(value));
    case 'boolean':
      return value === '1';
    case 'windows':
      return parseWindows(value);
    case 'string':
      return value;
  }
}

/**
 * An outbox entry's field/value pairs: lib.lua's emit writes them as one field `e` joined by
 * NUL; TypeScript and the scripts whose events carry free text write them as the entry's own.
 */
export function outboxFlat(fields: string[]): string[] {
  return fields.length === 2 && fields[0] === 'e' ? fields[1]!.split('\0') : fields;
}

/**
 * Turns one outbox entry (flat field/value strings written by a Lua script) into an event of
 * the current schema. Throws when the entry does not validate: that is a bug, not input.
 */
export function decodeOutboxEntry(fields: string[], config: CompiledConfig): HoldfastEvent {
  const flat = outboxFlat(fields);
  const kinds = FIELD_KINDS.get(flat[flat.indexOf('type') + 1] ?? '');
  const raw: Record<string, unknown> = { schemaVersion: CURRENT_SCHEMA_VERSION };
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const key = flat[i]!;
    raw[key] =
      key === 'inFlight' ? Number(flat[i + 1]) : decodeValue(flat[i + 1]!, kinds?.get(key));
  }
  if (raw.type === 'admission.refused') {
    const windows = raw.windows as ReturnType<typeof parseWindows>;
    const tenant = raw.tenant as string;
    const t = config.tenants.get(tenant);
    const model = config.models.get(raw.model as string);
    const maxTokens = raw.maxTokens as number;
    raw.message = refusalMessage({
      code: raw.code as RefusalCode,
      tenant,
      useCase: raw.useCase as string,
      model: raw.model as string,
      window: windows.find(
        (w) => w.tenant === raw.level && w.budget === raw.budget && w.scope === raw.scope,
      ),
      neededTokens: raw.neededTokens as number,
      neededMicroUsd: raw.neededMicroUsd as number,
      inFlight: (raw.inFlight as number | undefined) ?? 0,
      maxInFlight: t?.maxInFlight,
      reservationId: raw.reservationId as string,
      promptTokens: raw.promptTokens as number,
      maxTokens,
      ...(t && model
        ? shrinkFacts(
            t.mode,
            Math.min(t.shrinkToFit?.minOutputTokens ?? 0, maxTokens),
            model.pricePico,
          )
        : {}),
    });
  }
  return checkEvent(raw);
}

/** Flat outbox fields of an event written from TypeScript (no state changed with it). */
export function encodeOutboxFields(
  event: Record<string, string | number | boolean | null | undefined>,
): string[] {
  const out: string[] = [];
  for (const [key, value] of Object.entries(event)) {
    if (value === undefined) continue;
    out.push(
      key,
      value === null ? '' : typeof value === 'boolean' ? (value ? '1' : '0') : String(value),
    );
  }
  return out;
}
