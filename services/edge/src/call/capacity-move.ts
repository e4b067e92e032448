import type { UpstreamConfig } from '@holdfast/config';
import { declaresCapacity } from './context.js';
import type { CallDeps } from './deps.js';
import type { ForwardedCall } from './forward-call.js';

/**
 * Whether an admitted call may go on to a fallback upstream after its first failed it (a
 * 429/5xx, a connect failure, or the team holding its share of that one's connections). The
 * admission took the call's worst case of one upstream's declared capacity (or of none): a
 * fallback that declares capacity has it taken there first, as the admission took it (the same
 * tokens, the team's priority share and `tenantShare`: `capacity.move`), and what the call took
 * of the upstream before is given back (settled to what attempts there were billed, when the
 * provider read them and failed inside its stream: its account counted them; the tokens only,
 * its request kept, when the provider answered an attempt there with a 429/5xx); the call's close
 * then settles the fallback's. A fallback with no room for it is skipped. Before, the call went
 * to every fallback taking nothing of it: a team holding its connection to the first pushed its
 * calls onto a fallback past that one's limit (hostile.capacity-fallback.e2e). A fallback that
 * declares nothing needs no take, and one whose authority does not answer is not taken. A call
 * served unmetered (failOpen) took nothing anywhere and goes to any.
 */
export function fallbackClaim(
  deps: CallDeps,
  call: ForwardedCall,
  /** The tokens the call's failed attempts on an upstream were billed (none: undefined). */
  billedOn: (upstream: string) => number | undefined,
): ((target: UpstreamConfig, answered: ReadonlySet<string>) => Promise<boolean>) | undefined {
  if (!call.admitted) return undefined;
  const { ref } = call.hold;
  return async (target, answered) => {
    const declares = declaresCapacity(target, call.model);
    if (ref.upstream === undefined && !declares) return true;
    const used = ref.upstream === undefined ? undefined : billedOn(ref.upstream);
    // The provider answered an attempt there with an error: its account counted the request.
    const counted = used === undefined && ref.upstream !== undefined && answered.has(ref.upstream);
    const moved = await deps.authority.moveCapacity(
      {
        reservationId: ref.reservationId,
        tenant: ref.tenant,
        // The hold's org, as its closes name it: the team may have moved since.
        ...(ref.org === undefined ? {} : { org: ref.org }),
        model: call.model.id,
        ...(ref.upstream === undefined ? {} : { from: ref.upstream }),
        ...(used === undefined ? {} : { fromUsedTokens: used }),
        ...(counted ? { fromAnswered: true } : {}),
        to: target.id,
        tokens: call.promptTokens + call.maxOutput,
      },
      deps.options.admitTimeoutMs,
    );
    if (!moved.ok || !moved.value.moved) return !declares && !moved.ok;
    // Its close settles the capacity it took now, or none (the fallback declares none).
    if (declares) ref.upstream = target.id;
    else delete ref.upstream;
    return true;
  };
}

/**
 * Whether an admitted call may be retried on the upstream its capacity is on after the
 * provider answered an attempt there (a 429/5xx, or an error inside its stream): the provider
 * counted that request, so the retry takes one more of the upstream's declared requests per
 * minute (`capacity.retry`, the team's priority share and `tenantShare`). Before, the call's
 * 1 + maxRetries attempts counted as its one request, and a client whose prompts make the
 * upstream fail sent it up to 1 + maxRetries requests per request counted
 * (hostile.capacity-fallback.e2e). No room, or no answer from the authority: no retry there.
 * An upstream the call took no capacity of (it declares none) retries as before.
 */
export function retryTake(
  deps: CallDeps,
  call: ForwardedCall,
): ((target: UpstreamConfig) => Promise<boolean>) | undefined {
  if (!call.admitted) return undefined;
  const { ref } = call.hold;
  return async (target) => {
    if (ref.upstream !== target.id) return true;
    const taken = await deps.authority.retryCapacity(
      {
        reservationId: ref.reservationId,
        tenant: ref.tenant,
        // The hold's org, as its closes and moves name it: the team may have moved since.
        ...(ref.org === undefined ? {} : { org: ref.org }),
        model: call.model.id,
        upstream: target.id,
      },
      deps.options.admitTimeoutMs,
    );
    return taken.ok && taken.value.taken;
  };
}
