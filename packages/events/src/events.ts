import { Ajv } from 'ajv';
import { z } from 'zod';
import { inputJsonSchema } from './json-schema.js';
import { Err, Ok, type Result } from './errors.js';
import { upcast, type EventError } from './upcast.js';
import { AdmissionRefused } from './v1/admission.js';
import {
  BudgetExhaustionProjected,
  TenantResumed,
  TenantSuspended,
  ThresholdCrossed,
} from './v1/alerts.js';
import { ConfigChanged } from './v1/config.js';
import {
  ReservationCreated,
  ReservationExpired,
  ReservationExtended,
  ReservationMoved,
  ReservationRetried,
  ReservationOverrun,
  ReservationReleased,
  ReservationSettled,
} from './v1/reservation.js';

/** Every Holdfast event, discriminated on `type`. The one schema source for all services. */
export const HoldfastEvent = z.discriminatedUnion('type', [
  ReservationCreated,
  ReservationExtended,
  ReservationSettled,
  ReservationReleased,
  ReservationExpired,
  ReservationOverrun,
  ReservationMoved,
  ReservationRetried,
  AdmissionRefused,
  ThresholdCrossed,
  TenantSuspended,
  TenantResumed,
  BudgetExhaustionProjected,
  ConfigChanged,
]);
export type HoldfastEvent = z.infer<typeof HoldfastEvent>;
export type EventOf<T extends HoldfastEvent['type']> = Extract<HoldfastEvent, { type: T }>;
/** An event as it goes on the wire: a field with a default may be left out (parseEvent fills it). */
export type WireEvent = z.input<typeof HoldfastEvent>;

const decoder = new TextDecoder();

/** Where unknown keys are removed: an object's own keys, and the objects below it by name. */
interface KeepPlan {
  known: Set<string>;
  children: Array<[key: string, plan: KeepPlan, array: boolean]>;
  /**
   * The keys, in order, of the last object found to hold only known keys: an object with the
   * same keys in the same order (one producer's events all have one shape) is compared key by
   * key with it (interned strings: one pointer compare each) instead of looked up in `known`.
   */
  clean: string[];
}

/**
 * The keep plan of an object schema whose objects are reached only through `properties` (and
 * an array's `items`); undefined when an object sits anywhere else (an `anyOf`, say).
 */
function keepPlan(schema: Record<string, unknown>): KeepPlan | undefined {
  const props = (schema.properties ?? {}) as Record<string, Record<string, unknown>>;
  const children: KeepPlan['children'] = [];
  for (const [key, sub] of Object.entries(props)) {
    const items = sub.items as Record<string, unknown> | undefined;
    const object = sub.type === 'object' ? sub : sub.type === 'array' ? items : undefined;
    if (object?.type === 'object') {
      const plan = keepPlan(object);
      if (!plan) return undefined;
      children.push([key, plan, object !== sub]);
    } else if (JSON.stringify(sub).includes('"object"')) return undefined;
  }
  return { known: new Set(Object.keys(props)), children, clean: [] };
}

/** `value` (checked valid) without the keys its schema does not name, at every level. */
function keepKnown(value: Record<string, unknown>, plan: KeepPlan): void {
  const keys = Object.keys(value);
  if (!sameKeys(keys, plan.clean)) {
    let clean = true;
    for (const key of keys) {
      if (plan.known.has(key)) continue;
      delete value[key];
      clean = false;
    }
    if (clean) plan.clean = keys;
  }
  for (const [key, sub, array] of plan.children) {
    const child = value[key];
    if (child === undefined) continue;
    if (array) for (const item of child as Array<Record<string, unknown>>) keepKnown(item, sub);
    else keepKnown(child as Record<string, unknown>, sub);
  }
}

function sameKeys(a: string[], b: string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * `HoldfastEvent` compiled by ajv from zod's own JSON Schema, one validator per event type:
 * the same checks without zod's copy of every event (a settled event: zod 2.5 µs, this
 * 0.5 µs, measured; the aggregator parses every event). Options make ajv judge as zod does:
 * patterns without the `u` flag, formats checked by the patterns zod emits beside them,
 * unknown keys removed rather than refused (both count string lengths in code points). Unknown
 * keys are removed after ajv's check, by a walk of the schema's objects (`keepKnown`): ajv's own
 * removal (`removeAdditional`, a `for in` and a `hasOwnProperty` on the schema per key) was a
 * quarter of the parse's instructions. A test holds
 * both verdicts and outputs equal; an event ajv refuses goes through zod for the error
 * message (and zod's verdict wins).
 */
let fastChecks: Map<string, (v: unknown) => boolean> | undefined;

/**
 * The same checks without filling defaults (checkEvent): an event goes on the wire without
 * the fields at their defaults, which every reader's parseEvent fills (issue 14).
 */
let wireChecks: Map<string, (v: unknown) => boolean> | undefined;

/** Compiled on first use (~0.1 s): processes that never parse an event do not pay for it. */
function compileFastChecks(fill: boolean): Map<string, (v: unknown) => boolean> {
  const ajv = new Ajv({
    // Fields added to a version later carry defaults (zod applies them; so must a parse).
    useDefaults: fill,
    unicodeRegExp: false,
    validateFormats: false,
    allErrors: false,
    strict: false,
  });
  const byType = new Map<string, (v: unknown) => boolean>();
  for (const option of HoldfastEvent.options) {
    const schema = inputJsonSchema(option);
    const plan = keepPlan(schema);
    if (!plan)
      throw new Error(`${option.shape.type.value}: an object outside properties and items`);
    const check = ajv.compile(schema);
    byType.set(option.shape.type.value, (v) => {
      if (!check(v)) return false;
      keepKnown(v as Record<string, unknown>, plan);
      return true;
    });
  }
  return byType;
}

export type ParseResult = Result<HoldfastEvent, EventError>;

/**
 * Parses an event read from the wire: JSON text or bytes, upcast to the current schema
 * version, then validated. Never throws: a poison message is a value the caller dead-letters.
 */
export function parseEvent(data: string | Uint8Array): ParseResult {
  let raw: unknown;
  try {
    raw = JSON.parse(typeof data === 'string' ? data : decoder.decode(data));
  } catch {
    return Err({ code: 'invalid_json', message: 'event is not valid JSON' });
  }
  const upcasted = upcast(raw);
  if (!upcasted.ok) return upcasted;
  if (fastCheck(upcasted.value)) return Ok(upcasted.value as HoldfastEvent);
  const parsed = HoldfastEvent.safeParse(upcasted.value);
  if (!parsed.success) {
    return Err({ code: 'invalid_event', message: z.prettifyError(parsed.error) });
  }
  return Ok(parsed.data);
}

/**
 * Compiles the events' checks now instead of on the first event (parseEvent's and
 * checkEvent's): a server that checks events on its call path (the authority's relay) does
 * before it serves.
 */
export function prepareEventChecks(): void {
  fastChecks ??= compileFastChecks(true);
  wireChecks ??= compileFastChecks(false);
}

/** ajv's verdict on an event of the current schema (defaults filled, unknown keys removed). */
function fastCheck(value: Record<string, unknown>): boolean {
  fastChecks ??= compileFastChecks(true);
  return fastChecks.get(value.type as string)?.(value) ?? false;
}

/**
 * Validates an event object of the current schema as it goes on the wire (the authority's
 * outbox entries), as HoldfastEvent.parse does and with its error when invalid, at
 * parseEvent's cost. Unknown keys are removed; a field with a default that the object leaves
 * out stays out (the scripts write none at its default: `api` chat, the settle's cache writes,
 * reasoning and audio at 0), as every reader's parseEvent, old ones too, fills it: the value
 * is the event's wire form (parseEvent of its JSON gives the HoldfastEvent).
 */
export function checkEvent(value: Record<string, unknown>): WireEvent {
  wireChecks ??= compileFastChecks(false);
  if (wireChecks.get(value.type as string)?.(value)) return value as WireEvent;
  // Invalid (zod throws its error), or valid to zod only: its output, defaults filled.
  return HoldfastEvent.parse(value);
}
