import { loadTokenizer } from '@holdfast/tokenizer';
import { completionPieces, hash32, toolArguments } from '../generate.js';
import type { Plan } from '../plan.js';
import type { ServerToolBlocks } from '../server-tools.js';
import type { Billed } from '../usage.js';
import { candidateLength, type ReplyShape } from '../vendor.js';
import type { MessagesBody } from './schema.js';

type StopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use';

/** What the model writes for one Messages call: thinking, then text or one tool call. */
export interface MessagesOutput {
  thinking: { pieces: string[]; signature: string } | null;
  /** Text pieces, one token each (empty for a tool call). */
  text: string[];
  tool: {
    id: string;
    name: string;
    json: string;
    pieces: { text: string; tokens: number }[];
  } | null;
  stopReason: StopReason;
  stopSequence: string | null;
  /** The server tool uses, before the text: output the model writes (its name and input). */
  serverTools: (ServerToolBlocks & { tokens: number })[];
}

export function outputTokens(out: MessagesOutput): { output: number; reasoning: number } {
  const reasoning = out.thinking?.pieces.length ?? 0;
  const tool = out.tool?.pieces.reduce((n, p) => n + p.tokens, 0) ?? 0;
  const servers = out.serverTools.reduce((n, u) => n + u.tokens, 0);
  return { output: reasoning + servers + out.text.length + tool, reasoning };
}

/** The tool tool_choice forces (`any`: the first; `tool`: the named one), if any. */
function forcedTool(body: MessagesBody): string | null {
  const choice = body.tool_choice;
  if (choice?.type === 'tool') return choice.name ?? null;
  if (choice?.type === 'any') return body.tools?.[0]?.name ?? null;
  return null;
}

/**
 * Thinking (`thinking.type: enabled`, up to its budget; `adaptive`) spends the configured
 * reasoning tokens inside max_tokens, and so do the server tool uses (`uses`: the tool's name
 * and its input); the rest is text, cut at the first stop sequence, or the call of the tool
 * tool_choice forces.
 */
export async function generate(
  id: string,
  body: MessagesBody,
  reply: ReplyShape,
  plan: Plan,
  seed: number,
  uses: readonly ServerToolBlocks[] = [],
): Promise<MessagesOutput> {
  const o200k = await loadTokenizer('o200k_base');
  const serverTools = uses.map((u) => ({
    ...u,
    tokens: o200k.countText(u.name) + o200k.countText(u.input.partial_json),
  }));
  const used = serverTools.reduce((n, u) => n + u.tokens, 0);
  const shape = { ...reply, cap: Math.max(0, reply.cap - used) };
  const thinking = body.thinking;
  const budget =
    thinking?.type === 'enabled'
      ? Math.min(thinking.budget_tokens ?? plan.reasoningTokens, plan.reasoningTokens)
      : thinking?.type === 'adaptive'
        ? plan.reasoningTokens
        : 0;
  const { tokens, reasoning, finish } = candidateLength(shape, plan, seed, budget);
  const thought =
    reasoning > 0 || thinking?.type === 'enabled'
      ? { pieces: completionPieces(hash32('thinking', seed), reasoning), signature: `sig_${id}` }
      : null;
  const capped = finish === 'length';
  const name = forcedTool(body);
  if (name) {
    const args = toolArguments(seed, tokens, (t) => o200k.countText(t));
    const tool =
      args.tokens > 0 ? { id: `toolu_${id}`, name, json: args.json, pieces: args.pieces } : null;
    return {
      serverTools,
      thinking: thought,
      text: [],
      tool,
      stopReason: capped || !tool ? 'max_tokens' : 'tool_use',
      stopSequence: null,
    };
  }
  const { pieces, stop } = cutAtStop(completionPieces(seed, tokens), body.stop_sequences ?? []);
  return {
    serverTools,
    thinking: thought,
    text: pieces,
    tool: null,
    stopReason: stop ? 'stop_sequence' : capped ? 'max_tokens' : 'end_turn',
    stopSequence: stop,
  };
}

/** The text before the first stop sequence (which is not sent), and which one stopped it. */
function cutAtStop(
  pieces: string[],
  stops: readonly string[],
): { pieces: string[]; stop: string | null } {
  const text = pieces.join('');
  let at = -1;
  let stop: string | null = null;
  for (const s of stops) {
    const i = text.indexOf(s);
    if (i >= 0 && (at < 0 || i < at)) [at, stop] = [i, s];
  }
  if (at < 0) return { pieces, stop: null };
  const kept: string[] = [];
  let end = 0;
  for (const piece of pieces) {
    if (end + piece.length <= at) kept.push(piece);
    else if (end < at) kept.push(piece.slice(0, at - end));
    end += piece.length;
  }
  return { pieces: kept, stop };
}

export function anthropicUsage(b: Billed, thinking: boolean) {
  const writes = b.cacheWrite5mTokens + b.cacheWrite1hTokens;
  return {
    input_tokens: b.promptTokens - b.cachedTokens - writes,
    cache_creation_input_tokens: writes,
    cache_read_input_tokens: b.cachedTokens,
    cache_creation: {
      ephemeral_5m_input_tokens: b.cacheWrite5mTokens,
      ephemeral_1h_input_tokens: b.cacheWrite1hTokens,
    },
    output_tokens: b.completionTokens,
    service_tier: b.serviceTier,
    // Server tools billed per use, when the call offered any (what Anthropic reports).
    ...('web_search' in b.toolUses || 'web_fetch' in b.toolUses
      ? {
          server_tool_use: {
            web_search_requests: b.toolUses.web_search ?? 0,
            web_fetch_requests: b.toolUses.web_fetch ?? 0,
          },
        }
      : {}),
    ...(thinking ? { output_tokens_details: { thinking_tokens: b.reasoningTokens } } : {}),
  };
}

/** The content blocks of a finished message. */
export function contentBlocks(out: MessagesOutput): object[] {
  const blocks: object[] = [];
  if (out.thinking) {
    blocks.push({
      type: 'thinking',
      thinking: out.thinking.pieces.join(''),
      signature: out.thinking.signature,
    });
  }
  if (out.tool) {
    blocks.push({
      type: 'tool_use',
      id: out.tool.id,
      name: out.tool.name,
      input: JSON.parse(out.tool.json) as unknown,
    });
  } else if (out.text.length > 0 || !out.thinking) {
    blocks.push({ type: 'text', text: out.text.join('') });
  }
  return blocks;
}

export function messageObject(
  id: string,
  model: string,
  content: object[],
  stop: Pick<MessagesOutput, 'stopReason' | 'stopSequence'> | null,
  usage: ReturnType<typeof anthropicUsage>,
) {
  return {
    id: `msg_${id}`,
    type: 'message',
    role: 'assistant',
    model,
    content,
    stop_reason: stop?.stopReason ?? null,
    stop_sequence: stop?.stopSequence ?? null,
    usage,
  };
}
