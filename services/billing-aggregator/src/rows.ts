import { HoldfastEvent, windowCharge, type WindowState } from '@holdfast/events';
import { z } from 'zod';
import { compileRowWriter, type Column } from './rowbinary.js';
import { isIdentifier } from './sql.js';

const u32 = z.int().min(0).max(4_294_967_295);
const u64 = z.int().min(0).max(Number.MAX_SAFE_INTEGER);
const i64 = z.int().min(Number.MIN_SAFE_INTEGER).max(Number.MAX_SAFE_INTEGER);
const str = z.string().max(1_000_000);
const bit = z.int().min(0).max(1);

/**
 * One row of `events_raw_v1`, exactly as inserted. Every column is present: ClickHouse 18.16
 * gives an omitted JSONEachRow field its type's zero, not the column DEFAULT (measured here).
 */
export const EventRow = z.strictObject({
  id: str,
  type: str,
  schema_version: z.int().min(0).max(255),
  /** Unix seconds (JSONEachRow DateTime input that both 18.16 and current servers accept). */
  ts: u32,
  time_ms: u64,
  tenant: str,
  org: str,
  reservation_id: str,
  key_id: str,
  use_case: str,
  model: str,
  mode: str,
  prompt_tokens: u32,
  completion_tokens: u32,
  cached_prompt_tokens: u32,
  max_tokens: u32,
  requested_max_tokens: u32,
  held_tokens: u64,
  held_micro_usd: u64,
  billed_tokens: u64,
  cost_micro_usd: u64,
  charged_tokens: i64,
  charged_micro_usd: i64,
  needed_tokens: u64,
  needed_micro_usd: u64,
  outcome: str,
  reason: str,
  code: str,
  shadow: bit,
  budget: str,
  level: str,
  duration_ms: u32,
  w_level: z.array(str),
  w_budget: z.array(str),
  w_window: z.array(str),
  w_unit: z.array(str),
  w_limit: z.array(i64),
  w_used: z.array(i64),
  w_held: z.array(i64),
  w_enforce: z.array(bit),
  extra: str,
  stream_seq: u64,
  ingested_at: u32,
  // Added by migration 011 (at the end of the table, where ADD COLUMN puts them).
  api: str,
  cache_write_5m_tokens: u32,
  cache_write_1h_tokens: u32,
  reasoning_tokens: u32,
  // Added by migration 013.
  end_user: str,
  upstream: str,
  // Added by migration 015.
  audio_prompt_tokens: u32,
  audio_completion_tokens: u32,
  // Added by migration 016.
  service_tier: str,
  // Added by migration 017.
  long_context: bit,
  // Added by migration 018.
  tool_uses: u32,
  tool_fee_micro_usd: u64,
  // Added by migration 019: what the event added to each window (parallel to the w_* arrays).
  w_charged: z.array(i64),
  // Added by migration 021: 1 for a window the close lists as `removed` (parallel too).
  w_removed: z.array(bit),
});
export type EventRow = z.infer<typeof EventRow>;

/**
 * The INSERT's columns with their ClickHouse types, in `EventRow` order: what the RowBinary
 * body carries. A unit test holds it equal to migration 001's CREATE TABLE and the ADD COLUMNs
 * of 011, 013, 015, 016, 017, 018, 019 and 021.
 */
export const EVENTS_RAW_COLUMNS: readonly Column[] = [
  ['id', 'String'],
  ['type', 'String'],
  ['schema_version', 'UInt8'],
  ['ts', "DateTime('UTC')"],
  ['time_ms', 'UInt64'],
  ['tenant', 'String'],
  ['org', 'String'],
  ['reservation_id', 'String'],
  ['key_id', 'String'],
  ['use_case', 'String'],
  ['model', 'String'],
  ['mode', 'String'],
  ['prompt_tokens', 'UInt32'],
  ['completion_tokens', 'UInt32'],
  ['cached_prompt_tokens', 'UInt32'],
  ['max_tokens', 'UInt32'],
  ['requested_max_tokens', 'UInt32'],
  ['held_tokens', 'UInt64'],
  ['held_micro_usd', 'UInt64'],
  ['billed_tokens', 'UInt64'],
  ['cost_micro_usd', 'UInt64'],
  ['charged_tokens', 'Int64'],
  ['charged_micro_usd', 'Int64'],
  ['needed_tokens', 'UInt64'],
  ['needed_micro_usd', 'UInt64'],
  ['outcome', 'String'],
  ['reason', 'String'],
  ['code', 'String'],
  ['shadow', 'UInt8'],
  ['budget', 'String'],
  ['level', 'String'],
  ['duration_ms', 'UInt32'],
  ['w_level', 'Array(String)'],
  ['w_budget', 'Array(String)'],
  ['w_window', 'Array(String)'],
  ['w_unit', 'Array(String)'],
  ['w_limit', 'Array(Int64)'],
  ['w_used', 'Array(Int64)'],
  ['w_held', 'Array(Int64)'],
  ['w_enforce', 'Array(UInt8)'],
  ['extra', 'String'],
  ['stream_seq', 'UInt64'],
  ['ingested_at', "DateTime('UTC')"],
  ['api', 'String'],
  ['cache_write_5m_tokens', 'UInt32'],
  ['cache_write_1h_tokens', 'UInt32'],
  ['reasoning_tokens', 'UInt32'],
  ['end_user', 'String'],
  ['upstream', 'String'],
  ['audio_prompt_tokens', 'UInt32'],
  ['audio_completion_tokens', 'UInt32'],
  ['service_tier', 'String'],
  ['long_context', 'UInt8'],
  ['tool_uses', 'UInt32'],
  ['tool_fee_micro_usd', 'UInt64'],
  ['w_charged', 'Array(Int64)'],
  ['w_removed', 'Array(UInt8)'],
];

/** Writes a checked row (`rowProblem` found nothing) as RowBinary, in EVENTS_RAW_COLUMNS order. */
export const writeEventRow = compileRowWriter<EventRow>(EVENTS_RAW_COLUMNS);

/** The check of one column as an expression over `v`, from its zod type (numbers as literals). */
function checkCode(t: z.ZodType, column: string, v: string): string {
  if (t instanceof z.ZodNumber) {
    const [min, max] = [t.minValue ?? -Infinity, t.maxValue ?? Infinity];
    return `(typeof ${v} === 'number' && ${v} >= ${min} && ${v} <= ${max}${t.isInt ? ` && Number.isInteger(${v})` : ''})`;
  }
  if (t instanceof z.ZodString) {
    return `(typeof ${v} === 'string' && ${v}.length <= ${t.maxLength ?? Infinity})`;
  }
  if (t instanceof z.ZodArray) {
    return `(Array.isArray(${v}) && ${v}.every((x) => ${checkCode(t.element as z.ZodType, column, 'x')}))`;
  }
  throw new Error(`EventRow column ${column}: no fast check for this type`);
}

const COLUMNS = Object.keys(EventRow.shape);

/**
 * `rowProblem`'s column checks compiled from `EventRow`'s zod types into one straight-line
 * function (as the RowBinary writer is): named property reads, bounds as literals. Column
 * names are the schema's own identifiers.
 */
const firstBadColumn = (() => {
  const lines = Object.entries(EventRow.shape).map(([column, t]) => {
    if (!isIdentifier(column)) throw new Error(`not a column name: ${column}`);
    return `if (!${checkCode(t as z.ZodType, column, `r.${column}`)}) return '${column}';`;
  });
  // eslint-disable-next-line @typescript-eslint/no-implied-eval -- generated from EventRow's own shape, names checked above
  return new Function('r', `${lines.join('\n')}\nreturn undefined;`) as (
    row: Record<string, unknown>,
  ) => string | undefined;
})();

/**
 * `EventRow.safeParse` in the hot path, derived from the same schema: exactly its columns,
 * each within its type and bounds (a number out of a UInt32's range would wrap silently in
 * ClickHouse). Returns the first offending column, or undefined. Far cheaper than zod here,
 * where it runs once per event (zod's copy of every row cost ~6 µs and GC, measured).
 */
export function rowProblem(row: Record<string, unknown>): string | undefined {
  let keys = 0;
  for (const _ in row) keys++;
  if (keys !== COLUMNS.length) return 'columns do not match events_raw_v1';
  return firstBadColumn(row);
}

/** Event field -> value, 0 / '' when this type does not have it. */
function num(e: object, key: string): number {
  const v = (e as Record<string, unknown>)[key];
  return typeof v === 'number' ? v : 0;
}
function text(e: object, key: string): string {
  const v = (e as Record<string, unknown>)[key];
  return typeof v === 'string' ? v : '';
}

/** How long the call or the lease lasted (settled/released: durationMs; expired: leaseMs). */
export function duration(e: HoldfastEvent): number {
  if (e.type === 'reservation.expired') return e.leaseMs;
  return num(e, 'durationMs');
}

/** The tier a settlement billed or a hold was held at (`default` before tiers); '' elsewhere. */
export function serviceTier(e: HoldfastEvent): string {
  if (e.type !== 'reservation.settled' && e.type !== 'reservation.created') return '';
  return e.serviceTier ?? 'default';
}

/** Why: release reason, suspension reason, or who resumed. */
export function reason(e: HoldfastEvent): string {
  if (e.type === 'tenant.resumed') return e.by;
  return text(e, 'reason');
}

/** Event fields that have a column of their own (windows: the w_* arrays). */
const COLUMN_FIELDS = new Set([
  'id',
  'type',
  'schemaVersion',
  'time',
  'tenant',
  'org',
  'reservationId',
  'keyId',
  'useCase',
  'model',
  'mode',
  'promptTokens',
  'completionTokens',
  'cachedPromptTokens',
  'cacheWrite5mTokens',
  'cacheWrite1hTokens',
  'reasoningTokens',
  'audioPromptTokens',
  'audioCompletionTokens',
  'serviceTier',
  'longContext',
  'toolUses',
  'toolFeeMicroUsd',
  'api',
  'maxTokens',
  'requestedMaxTokens',
  'heldTokens',
  'heldMicroUsd',
  'billedTokens',
  'costMicroUsd',
  'chargedTokens',
  'chargedMicroUsd',
  'neededTokens',
  'neededMicroUsd',
  'outcome',
  'reason',
  'code',
  'shadow',
  'budget',
  'level',
  'durationMs',
  'leaseMs',
  'windows',
  'endUser',
  'upstream',
]);

/**
 * Each event type's fields without a column (a hold's `expiresAt`, a move's `fromUpstream`...),
 * in its schema's order; most types have none. A parsed event holds its schema's fields and no
 * other (unknown keys are removed), so these are all `extra` has to look at.
 */
const EXTRA_FIELDS: ReadonlyMap<string, readonly string[]> = new Map(
  HoldfastEvent.options.map((o) => [
    o.shape.type.value,
    Object.keys(o.shape).filter((k) => !COLUMN_FIELDS.has(k)),
  ]),
);

/**
 * The fields without a column, as JSON in the schema's order ('' when none): nothing of a
 * parsed event is dropped. `e` as `parseEvent` returns it (no field its schema does not name).
 */
export function extra(e: HoldfastEvent): string {
  const fields = EXTRA_FIELDS.get(e.type);
  if (fields === undefined || fields.length === 0) return '';
  // Built only when there is a field to keep.
  let rest: Record<string, unknown> | undefined;
  for (const k of fields) {
    const v = (e as Record<string, unknown>)[k];
    if (v !== undefined) (rest ??= {})[k] = v;
  }
  return rest ? JSON.stringify(rest) : '';
}

/**
 * Whose window, as `w_level` keeps it: the team or org id, or `<team>/key:<key>` and
 * `<team>/user:<end user>` for a key's or an end user's own budget (migration 013).
 */
export function windowLevel(w: Pick<WindowState, 'tenant' | 'scope' | 'subject'>): string {
  if (w.scope === 'key') return `${w.tenant}/key:${w.subject ?? ''}`;
  if (w.scope === 'end_user') return `${w.tenant}/user:${w.subject ?? ''}`;
  return w.tenant;
}

/** Maps a validated event to its row. `streamSeq` is the JetStream sequence (forensics). */
export function toEventRow(e: HoldfastEvent, streamSeq: number, nowMs = Date.now()): EventRow {
  const timeMs = Date.parse(e.time);
  const windows = 'windows' in e ? e.windows : [];
  const n = windows.length;
  const w = {
    level: new Array<string>(n),
    budget: new Array<string>(n),
    window: new Array<string>(n),
    unit: new Array<string>(n),
    limit: new Array<number>(n),
    used: new Array<number>(n),
    held: new Array<number>(n),
    enforce: new Array<number>(n),
    charged: new Array<number>(n),
    removed: new Array<number>(n),
  };
  // The event's own charge, which a window without a `charged` of its own was charged.
  const charge = {
    chargedTokens: num(e, 'chargedTokens'),
    chargedMicroUsd: num(e, 'chargedMicroUsd'),
  };
  for (let i = 0; i < n; i++) {
    const x = windows[i]!;
    w.level[i] = windowLevel(x);
    w.budget[i] = x.budget;
    w.window[i] = x.window;
    w.unit[i] = x.unit;
    w.limit[i] = x.limit;
    w.used[i] = x.used;
    w.held[i] = x.held;
    w.enforce[i] = x.enforce ? 1 : 0;
    w.charged[i] = windowCharge(charge, x);
    w.removed[i] = x.removed ? 1 : 0;
  }
  const row: EventRow = {
    id: e.id,
    type: e.type,
    schema_version: e.schemaVersion,
    ts: Math.floor(timeMs / 1000),
    time_ms: timeMs,
    tenant: e.tenant,
    org: e.org,
    reservation_id: text(e, 'reservationId'),
    key_id: text(e, 'keyId'),
    use_case: text(e, 'useCase'),
    model: text(e, 'model'),
    mode: text(e, 'mode'),
    prompt_tokens: num(e, 'promptTokens'),
    completion_tokens: num(e, 'completionTokens'),
    cached_prompt_tokens: num(e, 'cachedPromptTokens'),
    max_tokens: num(e, 'maxTokens'),
    requested_max_tokens: num(e, 'requestedMaxTokens'),
    held_tokens: num(e, 'heldTokens'),
    held_micro_usd: num(e, 'heldMicroUsd'),
    billed_tokens: num(e, 'billedTokens'),
    cost_micro_usd: num(e, 'costMicroUsd'),
    charged_tokens: charge.chargedTokens,
    charged_micro_usd: charge.chargedMicroUsd,
    needed_tokens: num(e, 'neededTokens'),
    needed_micro_usd: num(e, 'neededMicroUsd'),
    outcome: text(e, 'outcome'),
    reason: reason(e),
    code: text(e, 'code'),
    shadow: e.type === 'admission.refused' && e.shadow ? 1 : 0,
    budget: text(e, 'budget'),
    level: text(e, 'level'),
    duration_ms: duration(e),
    w_level: w.level,
    w_budget: w.budget,
    w_window: w.window,
    w_unit: w.unit,
    w_limit: w.limit,
    w_used: w.used,
    w_held: w.held,
    w_enforce: w.enforce,
    extra: extra(e),
    stream_seq: streamSeq,
    ingested_at: Math.floor(nowMs / 1000),
    api: text(e, 'api'),
    cache_write_5m_tokens: num(e, 'cacheWrite5mTokens'),
    cache_write_1h_tokens: num(e, 'cacheWrite1hTokens'),
    reasoning_tokens: num(e, 'reasoningTokens'),
    end_user: text(e, 'endUser'),
    upstream: text(e, 'upstream'),
    audio_prompt_tokens: num(e, 'audioPromptTokens'),
    audio_completion_tokens: num(e, 'audioCompletionTokens'),
    service_tier: serviceTier(e),
    long_context:
      (e.type === 'reservation.settled' || e.type === 'reservation.created') && e.longContext
        ? 1
        : 0,
    tool_uses: num(e, 'toolUses'),
    tool_fee_micro_usd: num(e, 'toolFeeMicroUsd'),
    w_charged: w.charged,
    w_removed: w.removed,
  };
  return row;
}
