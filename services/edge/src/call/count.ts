import { Err } from '@holdfast/runtime';
import { CountQueueFull } from '@holdfast/tokenizer';
import { EdgeError } from '../errors.js';
import { RefusedUncounted } from '../authority/admission.js';
import type { CountContext, Counted, SurfaceAdapter } from './adapter.js';

/**
 * What a tenant's queued counting is taken to drain at, to tell a refused client when to come
 * back: o200k counts about 10M characters of English a second on one worker here (2.5M
 * tokens), slower on other text; half of that.
 */
const DRAIN_CHARS_PER_SECOND = 5_000_000;

/**
 * A surface's prompt count, with the token counter's refusal as the edge's. A tenant that
 * already has EDGE_COUNT_QUEUE_CHARS of prompts waiting or being counted gets 429
 * `concurrency_limit`: it is the refusal of a tenant with too much in flight at once, which
 * clients already back off from (a new code would be one more for each to learn), and it
 * comes with a `Retry-After` of about the time its counts take. A count dropped because its
 * call ended while it waited answers an error nobody reads: the pipeline sees the call's
 * signal aborted first.
 */
export async function countPrompt<B>(
  count: SurfaceAdapter<B>['countPrompt'],
  body: B,
  ctx: CountContext,
): Promise<Counted> {
  try {
    return await count(body, ctx);
  } catch (err) {
    // Refused before the upstream counted it (beforeUpstreamCount): recorded as any refusal.
    if (err instanceof RefusedUncounted) return Err(err.refusal);
    if (err instanceof CountQueueFull) {
      ctx.deps.metrics.countRefusals.inc({ tenant: err.owner });
      return Err(queueFull(err));
    }
    if (ctx.owner.signal?.aborted) {
      return Err(new EdgeError({ code: 'internal', message: 'The call ended while counted.' }));
    }
    throw err;
  }
}

function queueFull(err: CountQueueFull): EdgeError {
  const n = (x: number) => x.toLocaleString('en-US');
  const seconds = Math.max(1, Math.ceil(err.pendingChars / DRAIN_CHARS_PER_SECOND));
  return new EdgeError({
    code: 'concurrency_limit',
    message:
      `Team ${err.owner} already has ${n(err.pendingChars)} characters of prompts being counted ` +
      `on this edge, its limit of ${n(err.limit)}; this call's prompt has ${n(err.chars)} more. ` +
      `Retry when they are counted.`,
    headers: { 'retry-after': String(seconds) },
  });
}
