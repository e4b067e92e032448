import { CURRENT_SCHEMA_VERSION, HoldfastEvent, SYSTEM_TENANT } from '@holdfast/events';
import type { CompiledConfig } from '@holdfast/config';
import type { z } from 'zod';
import { refusalMessage } from './messages.js';
import { parseWindows } from './windows.js';

/** Outbox fields that hold integers (the scripts write every value as a string). */
const INTEGER_FIELDS = new Set([
  'heldTokens',
  'heldMicroUsd',
  'promptTokens',
  'maxTokens',
  'requestedMaxTokens',
  'chargedTokens',
  'chargedMicroUsd',
  'completionTokens',
  'cachedPromptTokens',
  'billedTokens',
  'costMicroUsd',
  'durationMs',
  'leaseMs',
  'neededTokens',
  'neededMicroUsd',
  'graceMs',
  'version',
  'tenants',
  'inFlight',
]);
const NULL_IF_EMPTY = new Set(['keyId', 'budget', 'level']);
const TIME_FIELDS = new Set(['time', 'expiresAt']);

/**
 * Turns one outbox entry (flat field/value strings written by a Lua script) into an event of
 * the current schema. Throws when the entry does not validate: that is a bug, not input.
 */
export function decodeOutboxEntry(flat: string[], config: CompiledConfig): HoldfastEvent {
  const raw: Record<string, unknown> = { schemaVersion: CURRENT_SCHEMA_VERSION };
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const key = flat[i]!;
    const value = flat[i + 1]!;
    if (INTEGER_FIELDS.has(key)) raw[key] = Number(value);
    else if (TIME_FIELDS.has(key)) raw[key] = new Date(Number(value)).toISOString();
    else if (NULL_IF_EMPTY.has(key)) raw[key] = value === '' ? null : value;
    else if (key === 'windows') raw[key] = parseWindows(value);
    else if (key === 'shadow') raw[key] = value === '1';
    else if (key === 'retryAfterSeconds') raw[key] = Number(value) < 0 ? null : Number(value);
    else raw[key] = value;
  }
  if (raw.type === 'admission.refused') {
    const windows = raw.windows as ReturnType<typeof parseWindows>;
    const tenant = raw.tenant as string;
    raw.message = refusalMessage({
      code: raw.code as Parameters<typeof refusalMessage>[0]['code'],
      tenant,
      useCase: raw.useCase as string,
      model: raw.model as string,
      window: windows.find((w) => w.tenant === raw.level && w.budget === raw.budget),
      neededTokens: raw.neededTokens as number,
      neededMicroUsd: raw.neededMicroUsd as number,
      inFlight: (raw.inFlight as number | undefined) ?? 0,
      maxInFlight: config.tenants.get(tenant)?.maxInFlight,
      reservationId: raw.reservationId as string,
    });
  }
  return HoldfastEvent.parse(raw);
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

export type EventInput = z.input<typeof HoldfastEvent>;
export { SYSTEM_TENANT };
