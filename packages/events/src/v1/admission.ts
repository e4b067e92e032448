import { z } from 'zod';
import { AdmissionMode, ApiSurface } from '../amounts.js';
import { envelopeFields } from '../envelope.js';
import { EndUserId, KeyId, ModelId, PlainId, TenantId, UseCaseId, Uuid } from '../ids.js';
import { BudgetId } from '../windows.js';
import { count, windowsField } from './common.js';

/** Why a call was refused. Each maps to one HTTP status at the edge (docs/api.md). */
const REFUSAL_CODES = [
  'budget_exceeded',
  'concurrency_limit',
  'tenant_suspended',
  'unknown_tenant',
  'use_case_not_registered',
  'model_not_allowed',
  'reservation_closed',
  /** Every upstream of the model is at the capacity the tenant's priority may use. */
  'upstream_capacity',
  /** A new end user, and the tenant already tracks its `maxEndUsers` of them. */
  'end_user_limit',
] as const;
export const RefusalCode = z.enum(REFUSAL_CODES);
export type RefusalCode = z.infer<typeof RefusalCode>;

export const AdmissionRefused = z.object({
  ...envelopeFields,
  type: z.literal('admission.refused'),
  /** The id the edge proposed for the reservation that was not made. */
  reservationId: Uuid,
  keyId: KeyId.nullable(),
  /** The end user the call was for, when the client named one. */
  endUser: EndUserId.optional(),
  useCase: UseCaseId,
  model: ModelId,
  mode: AdmissionMode,
  /** The surface the call came in on (added later to v1: absent reads as `chat`). */
  api: ApiSurface.default('chat'),
  code: RefusalCode,
  message: z.string(),
  promptTokens: count,
  maxTokens: count,
  /** The worst case the call would have needed. */
  neededTokens: count,
  neededMicroUsd: count,
  /** The budget that did not fit, and the tenant (level) it belongs to. */
  budget: BudgetId.nullable(),
  level: TenantId.nullable(),
  /** The budget is the call's key's own, or its end user's (of `level`); absent: the level's. */
  scope: z.enum(['key', 'end_user']).optional(),
  /** upstream_capacity: the upstream that was full (the call was shed from it). */
  upstream: PlainId.optional(),
  retryAfterSeconds: z.number().int().min(0).nullable(),
  /** true: a shadow budget (enforce: false) would have refused; the call was admitted. */
  shadow: z.boolean(),
  /**
   * How many refusals this event stands for: 1, or more when the tenant was refused faster
   * than its refusal event rate and these were summarised (the fields are the last one's).
   */
  count: z.int().min(1).default(1),
  ...windowsField,
});

export type AdmissionRefused = z.infer<typeof AdmissionRefused>;
