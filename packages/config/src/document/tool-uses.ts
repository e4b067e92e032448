import { TOOL_USE_KINDS, type ToolUseKind } from '@holdfast/events';
import type { UpstreamApi } from './schema.js';

/**
 * Provider-run tools billed per use (docs/budgets.md, "How tool fees are held and billed"):
 * which tool types of a request are which kind, and what their uses cost.
 */

/**
 * The kinds every provider that runs them bills per use: a call offering one on a model whose
 * `price.toolUses` does not price it is a 400. `web_fetch` has no fee today: held and billed
 * only when the model prices it. Image generation is billed per image at the image model's
 * prices (by quality and size): the operator prices the dearest image it allows.
 */
export const FEE_TOOL_KINDS: ReadonlySet<ToolUseKind> = new Set([
  'web_search',
  'file_search',
  'code_interpreter',
  'image_generation',
]);

/**
 * The kind of a provider-run tool by its `type` as each API names it, by prefix so a dated
 * version Holdfast has not seen yet is billed as its kind (never free): Responses
 * `web_search`, `web_search_preview`, `web_search_2025_08_26`, `file_search`,
 * `code_interpreter`, `image_generation`; Messages `web_search_20250305`, `web_fetch_20250910`. Anthropic's code
 * execution (billed by container hours) and the other tools have no per-use kind.
 */
export function toolUseKind(api: UpstreamApi, type: string): ToolUseKind | undefined {
  if (type.startsWith('web_search')) return 'web_search';
  if (api === 'anthropic') return type.startsWith('web_fetch') ? 'web_fetch' : undefined;
  if (type.startsWith('file_search')) return 'file_search';
  if (type.startsWith('code_interpreter')) return 'code_interpreter';
  if (type.startsWith('image_generation')) return 'image_generation';
  return undefined;
}

/** A model's `price.toolUses` as integer micro-USD per 1,000 uses, by kind. */
export function toolUsePrices(model: {
  price: { toolUses?: Partial<Record<ToolUseKind, number>> | undefined };
}): Partial<Record<ToolUseKind, number>> {
  const prices: Partial<Record<ToolUseKind, number>> = {};
  for (const kind of TOOL_USE_KINDS) {
    const usd = model.price.toolUses?.[kind];
    if (usd !== undefined) prices[kind] = Math.round(usd * 1_000_000);
  }
  return prices;
}

/**
 * What `uses` cost at `prices` (micro-USD per 1,000 uses), integer micro-USD rounded up once
 * over all kinds, as close.lua bills them. A kind without a price costs nothing.
 */
export function toolFeeMicroUsd(
  prices: Partial<Record<ToolUseKind, number>>,
  uses: Partial<Record<ToolUseKind, number>>,
): number {
  let milli = 0;
  for (const kind of TOOL_USE_KINDS) milli += (uses[kind] ?? 0) * (prices[kind] ?? 0);
  return Math.ceil(milli / 1_000);
}

/** `prices` as the texts close.lua reads: `kind:micro-per-1000` joined by ','. */
export function toolUsesText(counts: Partial<Record<ToolUseKind, number>>): string {
  return TOOL_USE_KINDS.flatMap((kind) =>
    counts[kind] === undefined ? [] : [`${kind}:${counts[kind]}`],
  ).join(',');
}
