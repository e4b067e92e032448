import { z } from 'zod';
import { upcast } from './upcast.js';
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
  AdmissionRefused,
  ThresholdCrossed,
  TenantSuspended,
  TenantResumed,
  BudgetExhaustionProjected,
  ConfigChanged,
]);
export type HoldfastEvent = z.infer<typeof HoldfastEvent>;
export type EventOf<T extends HoldfastEvent['type']> = Extract<HoldfastEvent, { type: T }>;

export type ParseResult = { ok: true; event: HoldfastEvent } | { ok: false; error: string };

/**
 * Parses an event read from the wire: JSON text or bytes, upcast to the current schema
 * version, then validated. Never throws: a poison message is a value the caller dead-letters.
 */
export function parseEvent(data: string | Uint8Array): ParseResult {
  let raw: unknown;
  try {
    raw = JSON.parse(typeof data === 'string' ? data : new TextDecoder().decode(data));
  } catch {
    return { ok: false, error: 'event is not valid JSON' };
  }
  const upcasted = upcast(raw);
  if (!upcasted.ok) return upcasted;
  const parsed = HoldfastEvent.safeParse(upcasted.value);
  if (!parsed.success) return { ok: false, error: z.prettifyError(parsed.error) };
  return { ok: true, event: parsed.data };
}
