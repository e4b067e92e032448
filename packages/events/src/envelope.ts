import { z } from 'zod';
import { SYSTEM_TENANT, TenantId, Uuid } from './ids.js';

/** Every event type Holdfast emits (docs/events.md): dotted, lowercase. */
export const EVENT_TYPES = [
  'reservation.created',
  'reservation.extended',
  'reservation.settled',
  'reservation.released',
  'reservation.expired',
  'reservation.overrun',
  'reservation.moved',
  'reservation.retried',
  'admission.refused',
  'threshold.crossed',
  'tenant.suspended',
  'tenant.resumed',
  'budget.exhaustion_projected',
  'config.changed',
] as const;
export const EventType = z.enum(EVENT_TYPES);
export type EventType = z.infer<typeof EventType>;

export const CURRENT_SCHEMA_VERSION = 1;

/** An ISO-8601 UTC timestamp with milliseconds, as `Date.prototype.toISOString` writes it. */
export const IsoTime = z.iso.datetime();

/**
 * The fields every event carries. `id` is unique and is also the JetStream `Nats-Msg-Id`, so a
 * republished event is dropped by the stream and by every consumer that dedupes on it.
 */
export const envelopeFields = {
  id: Uuid,
  schemaVersion: z.literal(CURRENT_SCHEMA_VERSION),
  time: IsoTime,
  /** The team the event is about. */
  tenant: TenantId,
  /** The top of the tenant's hierarchy (the tenant itself when it has no parent). */
  org: TenantId,
};

/** Envelope of an event that belongs to no tenant. */
export const systemEnvelopeFields = {
  ...envelopeFields,
  tenant: z.literal(SYSTEM_TENANT),
  org: z.literal(SYSTEM_TENANT),
};
