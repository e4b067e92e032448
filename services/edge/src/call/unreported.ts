import type { Usage } from '@holdfast/events';
import { plainUsage } from '../surfaces/usage.js';
import type { Asked, CacheLifetime, InputUsage } from './adapter.js';
import type { ToolUses } from './tool-uses.js';

/** What is known of a call whose provider reported none of its usage. */
export interface UnreportedCall {
  asked: Asked;
  promptTokens: number;
  /** The output it was admitted for. */
  maxOutput: number;
  model: { reasoning?: boolean };
  /** The uses of provider-run tools billed per use it was held for (heldToolUses). */
  heldTools: ToolUses;
}

/**
 * What a call is billed when the provider reported no usage (the request went out and no
 * answer came, or the stream ended before the provider's figures): `output` tokens, what the
 * edge counted of the reply (0 when none came), and the prompt. Where the edge cannot tell
 * what the provider billed, the call is billed its hold's worst case, as the hold was priced:
 *
 * - a reasoning model, or a call that asks for reasoning: the admitted output, what the edge
 *   did not see of it as reasoning (hidden reasoning, a summary of the thinking billed whole);
 * - audio output asked: the admitted output, as audio;
 * - audio sent: the prompt as audio input;
 * - Anthropic cache breakpoints marked: the prompt as a cache write of the longest lifetime
 *   marked (1.25x or 2x the input price), unless the provider reported its input side
 *   (Messages' message_start, `input`), which is then billed as reported;
 * - provider-run tools billed per use (web search, ...): the bound held on their uses, or the
 *   uses the stream showed (`seenTools`) where it showed more (unreportedToolUses).
 *
 * The provider bills what it heard, made or wrote, however the call ended; billing less would
 * let a client that leaves before the answer spend past its budget at the provider.
 */
export function unreportedUsage(
  call: UnreportedCall,
  output: number,
  input: InputUsage | undefined,
  /** The longest cache lifetime the request marks (read only here). */
  cacheWrites: () => CacheLifetime | undefined,
  /** The tool uses the stream showed (a lower bound of what the provider ran). */
  seenTools?: ToolUses,
): Usage {
  const usage: Usage = { ...plainUsage(call.promptTokens, output), ...input };
  if ((call.model.reasoning === true || call.asked.reasoning === true) && output < call.maxOutput) {
    usage.completionTokens = call.maxOutput;
    usage.reasoningTokens = call.maxOutput - output;
  }
  if (call.asked.audioOutput) {
    usage.completionTokens = call.maxOutput;
    usage.audioCompletionTokens = call.maxOutput;
  }
  if (call.asked.audioInput) usage.audioPromptTokens = usage.promptTokens;
  if (!input) {
    const writes = cacheWrites();
    if (writes === '1h') usage.cacheWrite1hTokens = usage.promptTokens;
    if (writes === '5m') usage.cacheWrite5mTokens = usage.promptTokens;
  }
  const toolUses = unreportedToolUses(call.heldTools, seenTools, call.asked.tools?.per === 'call');
  if (toolUses) usage.toolUses = toolUses;
  return usage;
}

/**
 * The tool uses billed when the provider reported none: a search in progress, or one whose
 * block or item had not streamed when the call ended, is billed by the provider all the
 * same, so the uses the stream showed are only a lower bound. Each bound the call was held
 * for is billed whole, or the uses seen where there were more (an overrun). A bound on each
 * tool (Messages `max_uses`): each kind its bound or its uses seen, the greater. One bound on
 * all the call's tools (Responses `max_tool_calls`, held at the dearest kind, its one key):
 * the uses seen at their own kinds, and what is left of the bound at the dearest, as the hold
 * was priced: never past the hold while the provider kept to the bound, never below it.
 */
export function unreportedToolUses(
  held: ToolUses,
  seen: ToolUses | undefined,
  pooled: boolean,
): ToolUses | undefined {
  const uses: ToolUses = { ...seen };
  const bounds = Object.entries(held) as [keyof ToolUses, number][];
  if (pooled) {
    const shown = Object.values(uses).reduce((a, b) => a + b, 0);
    const [dearest, bound] = bounds[0] ?? [];
    if (dearest && bound !== undefined && shown < bound) {
      uses[dearest] = (uses[dearest] ?? 0) + bound - shown;
    }
  } else {
    for (const [kind, bound] of bounds) uses[kind] = Math.max(uses[kind] ?? 0, bound);
  }
  return Object.keys(uses).length > 0 ? uses : undefined;
}

/**
 * The longest lifetime of the Anthropic `cache_control` marks anywhere in a request (system
 * and message blocks, tools, blocks nested in tool results; no `ttl` is 5 minutes), undefined
 * when it marks none. Walks the body without recursion; read only for a call billed without
 * the provider's usage.
 */
export function longestCacheLifetime(body: unknown): CacheLifetime | undefined {
  let found: CacheLifetime | undefined;
  const stack: unknown[] = [body];
  while (stack.length > 0) {
    const v = stack.pop();
    if (Array.isArray(v)) {
      for (const x of v) if (x !== null && typeof x === 'object') stack.push(x);
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    for (const [k, x] of Object.entries(v)) {
      if (k === 'cache_control' && x !== null && typeof x === 'object') {
        if ((x as { ttl?: unknown }).ttl === '1h') return '1h';
        found = '5m';
      } else if (x !== null && typeof x === 'object') {
        stack.push(x);
      }
    }
  }
  return found;
}
