import { windowCharge, type HoldfastEvent, type WindowState } from '@holdfast/events';
import type { RowBinaryEncoder } from './rowbinary.js';
import { duration, extra, reason, serviceTier, windowLevel, type EventRow } from './rows.js';

/**
 * The bounds of `EventRow`'s column types (`rowProblem` derives the same from its zod schema;
 * event-row.unit.test.ts holds the two verdicts equal).
 */
const U32_MAX = 4_294_967_295;
const STR_MAX = 1_000_000;
const { MAX_SAFE_INTEGER, MIN_SAFE_INTEGER } = Number;

function isInt(v: unknown, min: number, max: number): v is number {
  return typeof v === 'number' && v >= min && v <= max && Number.isInteger(v);
}

/** Each writes the value when it fits its column and says whether it did. */
function str(enc: RowBinaryEncoder, v: unknown): boolean {
  if (typeof v !== 'string' || v.length > STR_MAX) return false;
  enc.string(v);
  return true;
}
function u8(enc: RowBinaryEncoder, v: unknown, max: number): boolean {
  if (!isInt(v, 0, max)) return false;
  enc.u8(v);
  return true;
}
function u32(enc: RowBinaryEncoder, v: unknown): boolean {
  if (!isInt(v, 0, U32_MAX)) return false;
  enc.u32(v);
  return true;
}
function u64(enc: RowBinaryEncoder, v: unknown): boolean {
  if (!isInt(v, 0, MAX_SAFE_INTEGER)) return false;
  enc.i64(v);
  return true;
}
function i64(enc: RowBinaryEncoder, v: unknown): boolean {
  if (!isInt(v, MIN_SAFE_INTEGER, MAX_SAFE_INTEGER)) return false;
  enc.i64(v);
  return true;
}

/**
 * The event fields the columns read that only some types have, read by name (one property
 * load per site, which V8 keeps fast; a shared `e[key]` lookup sees every key and every
 * event shape, and was the slow part of this row's writing).
 */
type Fields = {
  readonly [
    K in
      | 'api'
      | 'audioCompletionTokens'
      | 'audioPromptTokens'
      | 'billedTokens'
      | 'budget'
      | 'cacheWrite1hTokens'
      | 'cacheWrite5mTokens'
      | 'cachedPromptTokens'
      | 'chargedMicroUsd'
      | 'chargedTokens'
      | 'code'
      | 'completionTokens'
      | 'costMicroUsd'
      | 'endUser'
      | 'heldMicroUsd'
      | 'heldTokens'
      | 'keyId'
      | 'level'
      | 'maxTokens'
      | 'mode'
      | 'model'
      | 'neededMicroUsd'
      | 'neededTokens'
      | 'outcome'
      | 'promptTokens'
      | 'reasoningTokens'
      | 'requestedMaxTokens'
      | 'reservationId'
      | 'toolFeeMicroUsd'
      | 'toolUses'
      | 'upstream'
      | 'useCase'
  ]?: unknown;
};

/** A field's value, 0 / '' when this type does not have it (as `toEventRow` maps it). */
function num(v: unknown): number {
  return typeof v === 'number' ? v : 0;
}
function text(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

const NO_WINDOWS: readonly WindowState[] = [];

/**
 * Writes an event's row of `events_raw_v1` straight from the event, in EVENTS_RAW_COLUMNS
 * order: the bytes `writeEventRow(encoder, toEventRow(e, streamSeq, nowMs))` writes, without
 * the row object and its ten arrays in between. Each value is checked against its column's
 * type as it is written; the first that does not fit (in column order, as `rowProblem` finds
 * it) drops the row and is returned by name. `timeMs`: `Date.parse(e.time)`.
 */
export function encodeEventRow(
  enc: RowBinaryEncoder,
  e: HoldfastEvent,
  timeMs: number,
  streamSeq: number,
  nowMs: number,
): Buffer | string {
  const bad = writeColumns(enc, e, timeMs, streamSeq, nowMs);
  if (bad === undefined) return enc.end();
  enc.abort();
  return bad;
}

/** The first column that did not fit (the row is then partly written), or undefined. */
function writeColumns(
  enc: RowBinaryEncoder,
  e: HoldfastEvent,
  timeMs: number,
  streamSeq: number,
  nowMs: number,
): keyof EventRow | undefined {
  const f = e as Fields;
  const charge = {
    chargedTokens: num(f.chargedTokens),
    chargedMicroUsd: num(f.chargedMicroUsd),
  };
  const ws = 'windows' in e ? e.windows : NO_WINDOWS;
  const call = e.type === 'reservation.settled' || e.type === 'reservation.created';
  if (!str(enc, e.id)) return 'id';
  if (!str(enc, e.type)) return 'type';
  if (!u8(enc, e.schemaVersion, 255)) return 'schema_version';
  if (!u32(enc, Math.floor(timeMs / 1000))) return 'ts';
  if (!u64(enc, timeMs)) return 'time_ms';
  if (!str(enc, e.tenant)) return 'tenant';
  if (!str(enc, e.org)) return 'org';
  if (!str(enc, text(f.reservationId))) return 'reservation_id';
  if (!str(enc, text(f.keyId))) return 'key_id';
  if (!str(enc, text(f.useCase))) return 'use_case';
  if (!str(enc, text(f.model))) return 'model';
  if (!str(enc, text(f.mode))) return 'mode';
  if (!u32(enc, num(f.promptTokens))) return 'prompt_tokens';
  if (!u32(enc, num(f.completionTokens))) return 'completion_tokens';
  if (!u32(enc, num(f.cachedPromptTokens))) return 'cached_prompt_tokens';
  if (!u32(enc, num(f.maxTokens))) return 'max_tokens';
  if (!u32(enc, num(f.requestedMaxTokens))) return 'requested_max_tokens';
  if (!u64(enc, num(f.heldTokens))) return 'held_tokens';
  if (!u64(enc, num(f.heldMicroUsd))) return 'held_micro_usd';
  if (!u64(enc, num(f.billedTokens))) return 'billed_tokens';
  if (!u64(enc, num(f.costMicroUsd))) return 'cost_micro_usd';
  if (!i64(enc, charge.chargedTokens)) return 'charged_tokens';
  if (!i64(enc, charge.chargedMicroUsd)) return 'charged_micro_usd';
  if (!u64(enc, num(f.neededTokens))) return 'needed_tokens';
  if (!u64(enc, num(f.neededMicroUsd))) return 'needed_micro_usd';
  if (!str(enc, text(f.outcome))) return 'outcome';
  if (!str(enc, reason(e))) return 'reason';
  if (!str(enc, text(f.code))) return 'code';
  enc.u8(e.type === 'admission.refused' && e.shadow ? 1 : 0);
  if (!str(enc, text(f.budget))) return 'budget';
  if (!str(enc, text(f.level))) return 'level';
  if (!u32(enc, duration(e))) return 'duration_ms';
  // Each `w_*` column: the windows' count, then each window's value. A loop per column (not
  // one loop given each column's getter: that call site saw every getter and was not inlined).
  const n = ws.length;
  enc.length(n);
  for (const w of ws) if (!str(enc, windowLevel(w))) return 'w_level';
  enc.length(n);
  for (const w of ws) if (!str(enc, w.budget)) return 'w_budget';
  enc.length(n);
  for (const w of ws) if (!str(enc, w.window)) return 'w_window';
  enc.length(n);
  for (const w of ws) if (!str(enc, w.unit)) return 'w_unit';
  enc.length(n);
  for (const w of ws) if (!i64(enc, w.limit)) return 'w_limit';
  enc.length(n);
  for (const w of ws) if (!i64(enc, w.used)) return 'w_used';
  enc.length(n);
  for (const w of ws) if (!i64(enc, w.held)) return 'w_held';
  enc.length(n);
  for (const w of ws) enc.u8(w.enforce ? 1 : 0);
  if (!str(enc, extra(e))) return 'extra';
  if (!u64(enc, streamSeq)) return 'stream_seq';
  if (!u32(enc, Math.floor(nowMs / 1000))) return 'ingested_at';
  if (!str(enc, text(f.api))) return 'api';
  if (!u32(enc, num(f.cacheWrite5mTokens))) return 'cache_write_5m_tokens';
  if (!u32(enc, num(f.cacheWrite1hTokens))) return 'cache_write_1h_tokens';
  if (!u32(enc, num(f.reasoningTokens))) return 'reasoning_tokens';
  if (!str(enc, text(f.endUser))) return 'end_user';
  if (!str(enc, text(f.upstream))) return 'upstream';
  if (!u32(enc, num(f.audioPromptTokens))) return 'audio_prompt_tokens';
  if (!u32(enc, num(f.audioCompletionTokens))) return 'audio_completion_tokens';
  if (!str(enc, serviceTier(e))) return 'service_tier';
  enc.u8(call && e.longContext ? 1 : 0);
  if (!u32(enc, num(f.toolUses))) return 'tool_uses';
  if (!u64(enc, num(f.toolFeeMicroUsd))) return 'tool_fee_micro_usd';
  enc.length(n);
  for (const w of ws) if (!i64(enc, windowCharge(charge, w))) return 'w_charged';
  enc.length(n);
  for (const w of ws) enc.u8(w.removed ? 1 : 0);
  return undefined;
}
