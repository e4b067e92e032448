import type { z } from 'zod';
import { replyParse, requestCheck, type FastParse, type RequestCheck } from '../request-check.js';
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
export const CALL_PATH_REPLIES: ReadonlyMap<z.ZodType, FastParse<unknown>> = new Map<
  z.ZodType,
  FastParse<unknown>
>([
  [AdmitReply, replyParse(AdmitReply)],
  [ExtendReply, replyParse(ExtendReply)],
  [RenewReply, replyParse(RenewReply)],
  [CloseReply, replyParse(CloseReply)],
  [BatchReply, replyParse(BatchReply)],
]);

/**
 * Compiles the call path's reply parses now: a caller on the call path (the edge) does before it
 * serves, so that its first admit and close do not compile them (~0.1 s; 1-3 s on a loaded box).
 */
export function prepareCallPathReplies(): void {
  for (const parse of CALL_PATH_REPLIES.values()) parse.prepare();
}
