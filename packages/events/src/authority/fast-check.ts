import { requestCheck } from '../request-check.js';
import { AdmitRequest, ExtendRequest, RenewRequest } from './admit.js';
import type { BatchedOperation } from './operations.js';
import { ReleaseRequest, SettleRequest, USAGE_RULES } from './settle.js';

/**
 * The call path's requests (every call's admit and settle), each checked fast (issue 14);
 * `request-check.unit.test.ts` holds both verdicts and outputs equal to zod's.
 */
export const CALL_PATH_CHECKS = {
  admit: requestCheck(AdmitRequest),
  extend: requestCheck(ExtendRequest),
  renew: requestCheck(RenewRequest),
  settle: requestCheck(SettleRequest, [(r) => USAGE_RULES.every((rule) => rule.holds(r.usage))]),
  release: requestCheck(ReleaseRequest),
} satisfies Record<BatchedOperation, (body: unknown) => boolean>;
