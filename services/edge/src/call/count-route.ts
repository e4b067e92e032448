import type { FastifyReply, FastifyRequest } from 'fastify';
import { beforeOwnedCount, registered } from '../authority/admission.js';
import { notRegistered } from '../authority/refusal-memory.js';
import { EdgeError } from '../errors.js';
import { H } from '../request/headers.js';
import type { Asked, SurfaceAdapter } from './adapter.js';
import { badForwardedHeader, countContext, resolveModel } from './context.js';
import { countPrompt } from './count.js';
import type { CallDeps } from './deps.js';

/** How a surface's counting route reads its body and answers its count. */
export interface CountRoute<B extends { model: string }> {
  adapter: Pick<SurfaceAdapter<B>, 'apis' | 'path' | 'forwardHeaders' | 'sendError' | 'asked'>;
  /** The count as its call admits it (the adapter's `countPrompt`, or the part of it a count takes). */
  count: SurfaceAdapter<B>['countPrompt'];
  /** A refusal before anything is counted, if the body asks what a count cannot answer. */
  refuse?: (body: B) => EdgeError | undefined;
  /** The body of the answer. */
  answer: (tokens: number) => object;
}

/**
 * The stored response and items the count names, checked as its call's admission checks them
 * (beforeOwnedCount): before the upstream counts (the count context's check before any) and
 * before the count is answered. The call that stored them may still be closing on this edge:
 * its close records the owner, as the call waits for it (pipeline.ts).
 */
async function ownedBefore(
  deps: CallDeps,
  request: FastifyRequest,
  asked: Pick<Asked, 'previousResponseId' | 'itemIds'>,
): Promise<() => Promise<void>> {
  const tenant = request.caller!.tenant.id;
  const { admitTimeoutMs } = deps.options;
  await deps.holds.ownersRecorded(tenant, asked);
  const check = { authority: deps.authority, logger: request.log, timeoutMs: admitTimeoutMs };
  return beforeOwnedCount(check, tenant, asked);
}

/**
 * A counting route (`/v1/messages/count_tokens`, `/v1/responses/input_tokens`): the input
 * tokens Holdfast would admit the request with, counted as admission counts them (the
 * upstream's counting for `tokenizer: upstream`, or input only it can count). A count calls no
 * model and holds nothing, but it is still the caller's: the key, its use case and the model
 * must be ones that could make the call. The count goes in `x-holdfast-prompt-tokens` too.
 */
export async function serveCount<B extends { model: string }>(
  deps: CallDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  route: CountRoute<B>,
  body: B,
): Promise<FastifyReply> {
  const { adapter } = route;
  const caller = request.caller!;
  const resolved = resolveModel(deps, body.model, adapter);
  if (!resolved.ok) return adapter.sendError(request, reply, resolved.error);
  if (!resolved.value || !registered(caller, body.model)) {
    // Worded as the call's refusal (the authority's), so a count and its call agree.
    const err = new EdgeError(notRegistered({ caller, model: body.model }));
    return adapter.sendError(request, reply, err);
  }
  const refused = badForwardedHeader(request, adapter) ?? route.refuse?.(body);
  if (refused) return adapter.sendError(request, reply, refused);
  const stored = adapter.asked(body);
  const owned = await ownedBefore(deps, request, stored);
  const counting = countContext(
    deps,
    request,
    adapter,
    resolved.value,
    undefined,
    undefined,
    owned,
  );
  const counted = await countPrompt(
    async (b, ctx) => {
      const n = await route.count(b, ctx);
      // Counted here (no upstream asked): still answered only for what the tenant owns.
      if (n.ok) await owned();
      return n;
    },
    body,
    counting,
  );
  if (!counted.ok) return adapter.sendError(request, reply, counted.error);
  Object.assign(request.audit, { model: body.model, promptTokens: counted.value });
  return reply.header(H.promptTokens, String(counted.value)).send(route.answer(counted.value));
}
