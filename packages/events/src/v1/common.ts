import { z } from 'zod';
import { AdmissionMode, ApiSurface } from '../amounts.js';
import { EndUserId, KeyId, ModelId, UseCaseId, Uuid } from '../ids.js';
import { WindowState } from '../windows.js';

const count = z.int().min(0);

/** Who made the call: present on every reservation event. */
export const callFields = {
  reservationId: Uuid,
  /** The virtual key's id; null when the tenant came from `x-team` (trustHeaders). */
  keyId: KeyId.nullable(),
  useCase: UseCaseId,
  model: ModelId,
  mode: AdmissionMode,
  /** The surface the call came in on (added later to v1: absent reads as `chat`). */
  api: ApiSurface.default('chat'),
  /** The end user the call was for, when the client named one (absent: none). */
  endUser: EndUserId.optional(),
};

/** What a hold set aside (tokens and micro-USD; 0 in meter/post modes). */
export const holdFields = {
  heldTokens: count,
  heldMicroUsd: count,
};

/** The state of every budget window of the tenant and its ancestors after the change. */
export const windowsField = { windows: z.array(WindowState) };

export { count };
