import { z } from 'zod';
import { envelopeFields, IsoTime } from '../envelope.js';
import { callFields, count, holdFields, windowsField } from './common.js';

export const ReservationCreated = z.object({
  ...envelopeFields,
  type: z.literal('reservation.created'),
  ...callFields,
  ...holdFields,
  promptTokens: count,
  /** max_tokens granted (after shrink-to-fit). */
  maxTokens: count,
  /** max_tokens the edge asked for. */
  requestedMaxTokens: count,
  /** Billed at admission (estimate mode charges the prompt up front). */
  chargedTokens: count,
  chargedMicroUsd: count,
  expiresAt: IsoTime,
  ...windowsField,
});

export const SETTLE_OUTCOMES = [
  'completed',
  'client_disconnected',
  'upstream_error',
  'timeout',
  'budget_exhausted',
] as const;
export const SettleOutcome = z.enum(SETTLE_OUTCOMES);
export type SettleOutcome = z.infer<typeof SettleOutcome>;

export const ReservationSettled = z.object({
  ...envelopeFields,
  type: z.literal('reservation.settled'),
  ...callFields,
  /** The hold given back. */
  ...holdFields,
  promptTokens: count,
  completionTokens: count,
  cachedPromptTokens: count,
  /** prompt + completion: the real usage billed by this call. */
  billedTokens: count,
  /** The real cost billed by this call, integer micro-USD. */
  costMicroUsd: count,
  outcome: SettleOutcome,
  /** Time from admission to settlement. */
  durationMs: count,
  ...windowsField,
});

export const RELEASE_REASONS = [
  'upstream_error',
  'client_disconnected',
  'timeout',
  'not_forwarded',
  'admit_abandoned',
] as const;
export const ReleaseReason = z.enum(RELEASE_REASONS);
export type ReleaseReason = z.infer<typeof ReleaseReason>;

export const ReservationReleased = z.object({
  ...envelopeFields,
  type: z.literal('reservation.released'),
  ...callFields,
  ...holdFields,
  reason: ReleaseReason,
  durationMs: count,
  ...windowsField,
});

export const ReservationExpired = z.object({
  ...envelopeFields,
  type: z.literal('reservation.expired'),
  ...callFields,
  ...holdFields,
  leaseMs: count,
  ...windowsField,
});

export type ReservationCreated = z.infer<typeof ReservationCreated>;
export type ReservationSettled = z.infer<typeof ReservationSettled>;
export type ReservationReleased = z.infer<typeof ReservationReleased>;
export type ReservationExpired = z.infer<typeof ReservationExpired>;
