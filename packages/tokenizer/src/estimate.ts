import { jsonBound, parseJsonOrSelf, stringBound } from './bound.js';
import type { ChatPromptRequest, PromptContentPart, PromptMessage } from './types.js';
import { imageTokens } from './vision.js';

/** What one image costs with the `estimate` tokenizer (docs/budgets.md's flat figure). */
export const ESTIMATE_IMAGE_TOKENS = 1600;

/**
 * Tokens the chat framing of any shipped template (and OpenAI's) can add on top of the bounds
 * of the request's own strings and JSON values (bound.ts). A template's literal text is bounded
 * like any text (a token per byte) and each special token it emits counts 1. The largest case
 * of each, in bytes + specials (docs/budgets.md lists all of them):
 * - per request: Llama 3.1/3.2 open a system block even without a system message
 *   (`<|begin_of_text|>`, the header, "Cutting Knowledge Date: December 2023\nToday Date:
 *   26 Jul 2024\n\n", `<|eot_id|>`: 75) and the generation prompt (13); Qwen 2.5 injects its
 *   default system prompt (89 in all); OpenAI adds 3. 160 covers each.
 * - per message: Qwen wraps a tool result in `<|im_start|>user\n<tool_response>\n` ...
 *   `\n</tool_response><|im_end|>\n` (41, the largest); Llama renames `tool` to `ipython`.
 *   The JSON bound of the message already counts its keys and quotes on top of this.
 * - tools: Qwen's tool instructions ("# Tools\n\nYou may call one or more functions ...")
 *   are 397 bytes, Llama 3.1's "Given the following functions ..." 264 plus "Environment:
 *   ipython\n", Mistral's `[AVAILABLE_TOOLS]` wrapper a few; 640 covers each, and 64 the
 *   separators and `"description": null` fields a server adds per tool.
 * - per tool call: Qwen's `<tool_call>\n{"name": "`, `", "arguments": `, `}\n</tool_call>`
 *   (54), DeepSeek's fenced JSON with 4 specials (30), Llama's `{"name": "...", "parameters": `.
 */
const ESTIMATE_FRAMING = {
  perRequest: 160,
  perMessage: 48,
  toolsBlock: 640,
  perTool: 64,
  perToolCall: 64,
  toolChoice: 16,
} as const;

/**
 * An upper bound on the prompt tokens of a chat request in every shipped tokenizer and chat
 * template (and OpenAI's framing), with images at a flat 1,600 or the model's vision cost when
 * OpenAI's formula for it says more (docs/budgets.md).
 */
export function estimateChatPrompt(request: ChatPromptRequest): number {
  const F = ESTIMATE_FRAMING;
  let total = F.perRequest;
  for (const message of request.messages) {
    total += F.perMessage + messageBound(message, request.model);
  }
  const tools = [...(request.tools ?? []), ...(request.functions ?? [])];
  if (tools.length > 0) {
    total += F.toolsBlock;
    for (const tool of tools) total += F.perTool + jsonBound(tool, 1);
  }
  for (const choice of [request.tool_choice, request.function_call]) {
    if (choice !== undefined && choice !== null) total += F.toolChoice + jsonBound(choice);
  }
  const format = request.response_format as { json_schema?: unknown } | null | undefined;
  if (format?.json_schema !== undefined) total += jsonBound(format.json_schema);
  return total;
}

/** Every field of the message as JSON (templates render ids, names, calls), images flat. */
function messageBound(message: PromptMessage, model: string): number {
  const { content, tool_calls: calls, ...rest } = message;
  let total = jsonBound(rest);
  if (typeof content === 'string') total += stringBound(content);
  else if (Array.isArray(content)) {
    for (const part of content as readonly PromptContentPart[]) total += partBound(part, model);
  }
  for (const call of calls ?? []) {
    total += ESTIMATE_FRAMING.perToolCall + jsonBound(call);
    // Servers parse `arguments` and templates re-serialize it (`| tojson`): other spacing,
    // floats as Python prints them. Bound that rendering too, on top of the raw string's.
    const args = call.function?.arguments;
    if (typeof args === 'string') total += jsonBound(parseJsonOrSelf(args));
  }
  return total;
}

/**
 * An image: the flat 1,600, or what OpenAI's vision formula charges the model when that is
 * more (gpt-4o-mini's tiles, the mini/nano patches: up to tens of thousands for one image).
 */
function partBound(part: PromptContentPart, model: string): number {
  if (part.type === 'image_url') {
    const url = part.image_url?.url;
    const vision = typeof url === 'string' ? imageTokens(model, url, part.image_url?.detail) : 0;
    return Math.max(ESTIMATE_IMAGE_TOKENS, vision);
  }
  if (part.type === 'text' && typeof part.text === 'string') return stringBound(part.text);
  if (part.type === 'refusal' && typeof part.refusal === 'string') {
    return stringBound(part.refusal);
  }
  return jsonBound(part);
}

/** Special tokens a server may add around one input outside a chat (BOS, EOS). */
export const ESTIMATE_INPUT_SPECIALS = 2;
