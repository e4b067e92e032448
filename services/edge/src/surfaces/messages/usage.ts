import { LIMITS, type Usage } from '@holdfast/events';
import type { ToolUses } from '../../call/tool-uses.js';
import type { InputUsage } from '../../call/adapter.js';
import { plainUsage, usageCount } from '../usage.js';

/** Anthropic's `usage`: input_tokens excludes cache reads and writes, reported beside it. */
export interface AnthropicUsage {
  input_tokens?: unknown;
  output_tokens?: unknown;
  cache_creation_input_tokens?: unknown;
  cache_read_input_tokens?: unknown;
  cache_creation?: { ephemeral_5m_input_tokens?: unknown; ephemeral_1h_input_tokens?: unknown };
  output_tokens_details?: { thinking_tokens?: unknown };
  server_tool_use?: { web_search_requests?: unknown; web_fetch_requests?: unknown } | null;
  /** Each sampling iteration's counts (compaction, message, ...): their sum is the bill. */
  iterations?: unknown;
  [field: string]: unknown;
}

/**
 * `usage.server_tool_use` as the uses billed per use (web searches; web fetches, free today),
 * when Anthropic reported it.
 */
export function serverToolUses(u: AnthropicUsage | undefined): ToolUses | undefined {
  const s = u?.server_tool_use;
  if (!s || typeof s !== 'object') return undefined;
  const uses: ToolUses = {};
  const search = usageCount(s.web_search_requests);
  const fetch = usageCount(s.web_fetch_requests);
  if (search !== undefined) uses.web_search = Math.min(search, LIMITS.maxReportedToolUses);
  if (fetch !== undefined) uses.web_fetch = Math.min(fetch, LIMITS.maxReportedToolUses);
  return uses;
}

/**
 * The input side of an Anthropic usage, OpenAI-style (cache reads and writes are parts of
 * the prompt). Writes without the 5-minute / 1-hour breakdown (an API version that had only
 * the 5-minute cache) count as 5-minute writes, and so do writes beyond the breakdown: a
 * message_delta's cumulative `cache_creation_input_tokens` (which grows over a server tool
 * loop) comes without one, beside message_start's smaller breakdown. With `iterations`, the
 * sum over them (see billedIterations).
 */
export function anthropicInput(
  u: AnthropicUsage | undefined,
  summed = billedIterations(u),
): InputUsage | undefined {
  const top = inputOf(u);
  return summed && top && summed.input.promptTokens >= top.promptTokens ? summed.input : top;
}

function inputOf(u: AnthropicUsage | undefined): InputUsage | undefined {
  const input = usageCount(u?.input_tokens);
  if (input === undefined) return undefined;
  const writes = usageCount(u?.cache_creation_input_tokens) ?? 0;
  const read = usageCount(u?.cache_read_input_tokens) ?? 0;
  const w1h = Math.min(writes, usageCount(u?.cache_creation?.ephemeral_1h_input_tokens) ?? 0);
  return {
    promptTokens: input + writes + read,
    cachedPromptTokens: read,
    cacheWrite5mTokens: writes - w1h,
    cacheWrite1hTokens: w1h,
  };
}

/**
 * `usage.iterations` (the compaction beta, server tool loops): the top-level counts leave out
 * a compaction iteration (Anthropic's compaction docs: "To calculate total tokens consumed and
 * billed for a request, sum across all entries in the usage.iterations array"). The sum over
 * every entry, or undefined when there are none or one is not a usage.
 */
function billedIterations(
  u: AnthropicUsage | undefined,
): { input: InputUsage; output: number } | undefined {
  const iterations = u?.iterations;
  if (!Array.isArray(iterations) || iterations.length === 0) return undefined;
  const sum: InputUsage = {
    promptTokens: 0,
    cachedPromptTokens: 0,
    cacheWrite5mTokens: 0,
    cacheWrite1hTokens: 0,
  };
  let output = 0;
  for (const it of iterations as AnthropicUsage[]) {
    const input = inputOf(it);
    const out = usageCount(it?.output_tokens);
    if (!input || out === undefined) return undefined;
    sum.promptTokens += input.promptTokens;
    sum.cachedPromptTokens += input.cachedPromptTokens;
    sum.cacheWrite5mTokens += input.cacheWrite5mTokens;
    sum.cacheWrite1hTokens += input.cacheWrite1hTokens;
    output += out;
  }
  if (sum.promptTokens > LIMITS.maxPromptTokens || output > LIMITS.maxOutputTokens)
    return undefined;
  return { input: sum, output };
}

/** The whole usage once the output is known (message_delta). */
export function anthropicUsage(u: AnthropicUsage | undefined): Usage | undefined {
  const summed = billedIterations(u);
  const input = anthropicInput(u, summed);
  const top = usageCount(u?.output_tokens);
  if (!input || top === undefined) return undefined;
  const output = Math.max(top, summed?.output ?? 0);
  const thinking = usageCount(u?.output_tokens_details?.thinking_tokens) ?? 0;
  return { ...plainUsage(0, output), ...input, reasoningTokens: Math.min(thinking, output) };
}

/** A settled usage in Anthropic's shape (what an assembled message reports). */
export function toAnthropicUsage(usage: Usage): AnthropicUsage {
  const writes = usage.cacheWrite5mTokens + usage.cacheWrite1hTokens;
  return {
    input_tokens: usage.promptTokens - usage.cachedPromptTokens - writes,
    cache_creation_input_tokens: writes,
    cache_read_input_tokens: usage.cachedPromptTokens,
    cache_creation: {
      ephemeral_5m_input_tokens: usage.cacheWrite5mTokens,
      ephemeral_1h_input_tokens: usage.cacheWrite1hTokens,
    },
    output_tokens: usage.completionTokens,
    ...(usage.toolUses
      ? {
          server_tool_use: {
            web_search_requests: usage.toolUses.web_search ?? 0,
            web_fetch_requests: usage.toolUses.web_fetch ?? 0,
          },
        }
      : {}),
  };
}
