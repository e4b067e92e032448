import { ESTIMATE_IMAGE_TOKENS } from '../estimate.js';
import type {
  ChatPromptRequest,
  PromptContentPart,
  PromptMessage,
  PromptTool,
  PromptToolCall,
} from '../types.js';
import { markNumbers, parseWithPythonNumbers, type PythonNumber } from './python-json.js';

/** What a chat template is rendered with, shaped the way vLLM hands an OpenAI request to it. */
export interface TemplateInput {
  messages: Record<string, unknown>[];
  /** Undefined when the request has none, so `{% if tools %}` templates take their plain path. */
  tools: Record<string, unknown>[] | undefined;
  /**
   * Assistant messages with tool calls and no text, whose content is "" here (vLLM's choice).
   * llama.cpp passes null instead, which some templates render differently (DeepSeek renders
   * the calls only then), so the counter also tries null for these and keeps the larger count.
   */
  nullableContent: number[];
  /** JSON of parts no template renders as text (audio, files), counted as their text. */
  otherParts: string[];
  images: number;
  /** The numbers of tool-call arguments and tools, as markers in them (python-json.ts). */
  numbers: PythonNumber[];
}

/**
 * Maps an OpenAI Chat Completions request onto a Hugging Face chat template's inputs, as vLLM
 * does: text parts joined with a newline (its string content format), a missing content as "",
 * tool-call arguments parsed from their JSON string (with Python's numbers: python-json.ts), tools passed with
 * `description` and `parameters` present (null when missing) and any other field kept (llama.cpp
 * passes a tool through as sent). Images count ESTIMATE_IMAGE_TOKENS each, outside the template.
 * `response_format` and `tool_choice` are not part of the prompt on these servers (they steer
 * decoding), so they are not counted.
 */
export function templateInput(
  request: ChatPromptRequest,
  /** false: each call's `arguments` left the string it was sent as (llama.cpp, where the template takes one). */
  parseArguments = true,
): TemplateInput {
  const input: TemplateInput = {
    messages: [],
    tools: undefined,
    nullableContent: [],
    otherParts: [],
    images: 0,
    numbers: [],
  };
  for (const message of request.messages) {
    input.messages.push(templateMessage(message, input, parseArguments));
  }
  const tools = [
    ...(request.tools ?? []),
    ...(request.functions ?? []).map((fn): PromptTool => ({ type: 'function', function: fn })),
  ];
  if (tools.length > 0) {
    input.tools = tools.map(
      (t) => markNumbers(templateTool(t), input.numbers) as Record<string, unknown>,
    );
  }
  return input;
}

function templateMessage(
  message: PromptMessage,
  input: TemplateInput,
  parseArguments: boolean,
): Record<string, unknown> {
  const { content, refusal, tool_calls: calls, function_call: legacyCall, ...rest } = message;
  const texts: string[] = [];
  if (typeof content === 'string') texts.push(content);
  else if (Array.isArray(content)) {
    for (const part of content as readonly PromptContentPart[]) {
      if (part.type === 'text' && typeof part.text === 'string') texts.push(part.text);
      else if (part.type === 'refusal' && typeof part.refusal === 'string')
        texts.push(part.refusal);
      else if (part.type === 'image_url') input.images += 1;
      else input.otherParts.push(JSON.stringify(part));
    }
  }
  if (refusal) texts.push(refusal);
  const toolCalls = [...(calls ?? [])];
  if (legacyCall) toolCalls.push({ type: 'function', function: legacyCall });
  const out: Record<string, unknown> = { ...rest, content: texts.join('\n') };
  if (toolCalls.length > 0) {
    out.tool_calls = toolCalls.map((call) =>
      templateToolCall(call, parseArguments ? input.numbers : undefined),
    );
    if (texts.length === 0) input.nullableContent.push(input.messages.length);
  }
  return out;
}

/** A call for the template; `numbers` undefined: its arguments left as sent. */
function templateToolCall(
  call: PromptToolCall,
  numbers: PythonNumber[] | undefined,
): Record<string, unknown> {
  const { function: fn, ...rest } = call;
  const args = fn?.arguments ?? '';
  return {
    ...rest,
    type: call.type ?? 'function',
    function: {
      ...fn,
      name: fn?.name ?? '',
      arguments: numbers ? parseWithPythonNumbers(args, numbers) : args,
    },
  };
}

function templateTool(tool: PromptTool): Record<string, unknown> {
  if (tool.type !== 'function' || !tool.function) return { ...tool };
  const { name, description, parameters, ...rest } = tool.function;
  return {
    ...tool,
    function: { name, description: description ?? null, parameters: parameters ?? null, ...rest },
  };
}

/** Tokens of the parts counted outside the template. */
export function outsideTokens(input: TemplateInput, countText: (text: string) => number): number {
  let total = input.images * ESTIMATE_IMAGE_TOKENS;
  for (const part of input.otherParts) total += countText(part);
  return total;
}
