import {
  CURRENT_SCHEMA_VERSION,
  isoTime,
  HoldfastEvent,
  checkEvent,
  type RefusalCode,
  type WireEvent,
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

/** Builds an entry's event object from its flat strings, or undefined when not of its shape. */
type ShapeDecoder = (flat: string[]) => Record<string, unknown> | undefined;

/** Most entry shapes (which fields, in which order) compiled per event type. */
const MAX_SHAPES_PER_TYPE = 16;

/** Compiled decoders by event type, the most recently compiled last. */
const SHAPES = new Map<string, ShapeDecoder[]>();

/** A field name a compiled object literal stores as decodeValue's keyed store does. */
const PLAIN_NAME = /^[A-Za-z][A-Za-z0-9]*$/;

/** decodeValue of `v` (the code of a string expression) for a field of kind `f`, as code. */
function valueCode(name: string, v: string, f: FieldKind | undefined): string {
  if (name === 'inFlight') return `Number(${v})`;
  if (!f) return v;
  const plain =
    f.kind === 'number'
      ? `Number(${v})`
      : f.kind === 'time'
        ? `isoTime(Number(${v}))`
        : f.kind === 'boolean'
          ? `${v} === '1'`
          : f.kind === 'windows'
            ? `parseWindows(${v})`
            : v;
  if (!f.nullable) return plain;
  return f.kind === 'number'
    ? `(${v} === '' || Number(${v}) < 0 ? null : ${plain})`
    : `(${v} === '' ? null : ${plain})`;
}

/**
 * A decoder for entries whose field names are `flat`'s, in its order: one object literal with
 * the fields decoded by index (issue 14). decodeOutboxEntry's keyed stores left a
 * dictionary-mode object that JSON.stringify wrote 1.6x slower than this one with fast
 * properties; the keys (`schemaVersion`, then the entry's order) and values are the same
 * (outbox-decode.unit.test.ts holds both to the loop over many generated entries). Undefined
 * for an entry a literal would store otherwise (a repeated, odd or prototype name).
 */
function compileShape(flat: string[], kinds: Map<string, FieldKind>): ShapeDecoder | undefined {
  if (flat.length % 2 !== 0) return undefined;
  const names: string[] = [];
  for (let i = 0; i < flat.length; i += 2) names.push(flat[i]!);
  if (new Set(names).size !== names.length) return undefined;
  if (names.some((n) => !PLAIN_NAME.test(n) || n === 'schemaVersion' || n in Object.prototype)) {
    return undefined;
  }
  const checks = names.map((n, i) => `f[${2 * i}] !== ${JSON.stringify(n)}`);
  const stores = names.map(
    (n, i) => `${JSON.stringify(n)}: ${valueCode(n, `f[${2 * i + 1}]`, kinds.get(n))}`,
  );
  const code = `return function (f) {
    if (f.length !== ${flat.length} || ${checks.join(' || ')}) return undefined;
    return { schemaVersion: ${CURRENT_SCHEMA_VERSION}, ${stores.join(', ')} };
  }`;
  // eslint-disable-next-line @typescript-eslint/no-implied-eval -- the scripts' field names, checked plain above
  const make = new Function('isoTime', 'parseWindows', code) as (
    iso: typeof isoTime,
    windows: typeof parseWindows,
  ) => ShapeDecoder;
  return make(isoTime, parseWindows);
}

/** The entry's fields as an object of the current schema: by its shape's decoder when it has one. */
export function decodeFields(flat: string[]): Record<string, unknown> {
  const type = flat[0] === 'type' ? flat[1] : undefined;
  const kinds = type === undefined ? undefined : FIELD_KINDS.get(type);
  if (type === undefined || !kinds) return decodeLoop(flat);
  let shapes = SHAPES.get(type);
  if (shapes) {
    for (let i = shapes.length - 1; i >= 0; i--) {
      const raw = shapes[i]!(flat);
      if (raw) return raw;
    }
  }
  if (shapes && shapes.length >= MAX_SHAPES_PER_TYPE) return decodeLoop(flat);
  const shape = compileShape(flat, kinds);
  if (!shape) return decodeLoop(flat);
  if (shapes) shapes.push(shape);
  else SHAPES.set(type, (shapes = [shape]));
  return shape(flat)!;
}

/** The entry's fields decoded one keyed store each (any entry; its key order is the literal's). */
export function decodeLoop(flat: string[]): Record<string, unknown> {
  const kinds = FIELD_KINDS.get(flat[flat.indexOf('type') + 1] ?? '');
  const raw: Record<string, unknown> = { schemaVersion: CURRENT_SCHEMA_VERSION };
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const key = flat[i]!;
    raw[key] =
      key === 'inFlight' ? Number(flat[i + 1]) : decodeValue(flat[i + 1]!, kinds?.get(key));
  }
  return raw;
}

/**
 * Turns one outbox entry (flat field/value strings written by a Lua script) into an event of
 * the current schema, as it goes on the wire: the fields the entry leaves at their defaults
 * stay out (checkEvent). Throws when the entry does not validate: that is a bug, not input.
 */
export function decodeOutboxEntry(fields: string[], config: CompiledConfig): WireEvent {
  const raw = decodeFields(outboxFlat(fields));
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
