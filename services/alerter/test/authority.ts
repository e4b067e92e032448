import { randomUUID } from 'node:crypto';
import type { AdmitRequest } from '@holdfast/events';

/** An admit request for `tenant` (use case UC-1, gpt-4o-mini). */
export function call(tenant: string, promptTokens = 100, maxTokens = 900): AdmitRequest {
  return {
    reservationId: randomUUID(),
    tenant,
    keyId: null,
    useCase: 'UC-1',
    model: 'gpt-4o-mini',
    promptTokens,
    maxTokens,
  };
}
