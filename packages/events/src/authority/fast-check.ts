import type { z } from 'zod';
import { replyParse, requestCheck, type RequestCheck } from '../request-check.js';
import {
  AdmitReply,
  AdmitRequest,
  ExtendReply,
  ExtendRequest,
  RenewReply,
  RenewRequest,
} from './admit.js';
import { BatchReply, type BatchedOperation } from './operations.js';
import { CloseReply, ReleaseRequest, SettleRequest, USAGE_RULES } from './settle.js';

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
} satisfies Record<BatchedOperation, RequestCheck>;

/**
 * The call path's replies (every call's admit and settle, as the edge reads them), each parsed
 * fast to zod's output (issue 14); `reply-check.unit.test.ts` holds them equal to zod's.
 */
export const CALL_PATH_REPLIES: ReadonlyMap<z.ZodType, (reply: unknown) => unknown> = new Map<
  z.ZodType,
  (reply: unknown) => unknown
>([
  [AdmitReply, replyParse(AdmitReply)],
  [ExtendReply, replyParse(ExtendReply)],
  [RenewReply, replyParse(RenewReply)],
  [CloseReply, replyParse(CloseReply)],
  [BatchReply, replyParse(BatchReply)],
]);
