import {
  computeChatCompletionTokenCount,
  FUNCTION_CALL_METADATA_TOKEN_OVERHEAD,
  FUNCTION_DEFINITION_TOKEN_OVERHEAD,
  type ChatCompletionFunctionCallOption,
  type ChatCompletionFunctionDefinition,
  type ChatCompletionFunctionParameters,
  type ChatCompletionRequest,
  type ChatMessage,
} from 'gpt-tokenizer/functionCalling';
import { promptCounts } from './count-cache.js';
import type { Tokenizer } from './tokenizers.js';
import type { ChatPromptRequest, PromptMessage, PromptToolCall } from './types.js';
import { imageTokens } from './vision.js';

type Count = (text: string) => number;

/**
 * Prompt tokens of a Chat Completions request, as OpenAI reports them in `usage.prompt_tokens`.
 *
 * Framing follows OpenAI's cookbook ("How to count tokens with tiktoken", section 6): 3 tokens per
 * message, the role, the content, the name plus 1, and 3 for the reply primer. Function and tool
 * definitions use gpt-tokenizer's rendering of them as a TypeScript namespace (the formula of
 * hmarr/openai-chat-tokens), which also matches the cookbook's tool example (section 7).
 * Images follow the vision cost formula (`vision.ts`), or a flat 1,600 with `estimate`.
 * Parts whose cost OpenAI does not document (audio, files, non-function tools, a JSON schema
 * response format) count as their JSON text: an overestimate rather than a miss.
 *
 * Tokenizers that frame chats themselves (open-weight chat templates, the `estimate` bound)
 * count the request their own way.
 */
export function countChatPrompt(request: ChatPromptRequest, tokenizer: Tokenizer): number {
  if (tokenizer.countChat) return tokenizer.countChat(request);
  // A repeated text (a system prompt, tool definitions) is counted once: count-cache.ts.
  const cache = promptCounts(tokenizer);
  const count: Count = (text) => cache.count(text);
  let extra = 0;
  const messages = request.messages.map((message): ChatMessage => {
    const content = flattenContent(message, request.model, tokenizer);
    extra += content.extraTokens;
    for (const call of message.tool_calls ?? []) extra += toolCallTokens(call, count);
    const chat: ChatMessage = { role: message.role, content: content.text };
    if (message.name) chat.name = message.name;
    if (message.function_call) chat.function_call = { ...message.function_call };
    return chat;
  });

  const functions: ChatCompletionFunctionDefinition[] = (request.functions ?? []).map(toDefinition);
  for (const tool of request.tools ?? []) {
    if (tool.type === 'function' && tool.function) functions.push(toDefinition(tool.function));
    else extra += count(JSON.stringify(tool));
  }
  extra += responseFormatTokens(request.response_format, count);

  const framed: ChatCompletionRequest = { messages };
  if (functions.length > 0) framed.functions = functions;
  const functionCall = functionCallOption(request.tool_choice ?? request.function_call);
  if (functionCall) framed.function_call = functionCall;
  return countFramed(framed, count) + extra;
}

function countFramed(request: ChatCompletionRequest, count: Count): number {
  try {
    return computeChatCompletionTokenCount(request, count);
  } catch {
    // A JSON Schema too malformed for the function renderer: count the definitions as JSON text.
    const { functions, ...rest } = request;
    return (
      computeChatCompletionTokenCount(rest, count) +
      count(JSON.stringify(functions)) +
      FUNCTION_DEFINITION_TOKEN_OVERHEAD
    );
  }
}

/** The message's text (parts joined) and the tokens of its non-text parts. */
function flattenContent(
  message: PromptMessage,
  model: string,
  tokenizer: Tokenizer,
): { text: string; extraTokens: number } {
  const { content } = message;
  let text = typeof content === 'string' ? content : '';
  let extraTokens = 0;
  if (typeof content !== 'string' && content) {
    for (const part of content) {
      if (part.type === 'text' && typeof part.text === 'string') text += part.text;
      else if (part.type === 'refusal' && typeof part.refusal === 'string') text += part.refusal;
      else if (part.type === 'image_url' && typeof part.image_url?.url === 'string') {
        extraTokens += imageTokens(model, part.image_url.url, part.image_url.detail);
      } else extraTokens += tokenizer.countText(JSON.stringify(part));
    }
  }
  if (message.refusal) text += message.refusal;
  return { text, extraTokens };
}

/** A tool call is counted like a legacy function call: name, arguments and 3 tokens of framing. */
function toolCallTokens(call: PromptToolCall, count: Count): number {
  if (!call.function) return count(JSON.stringify(call));
  const { name = '', arguments: args = '' } = call.function;
  return count(name) + count(args) + FUNCTION_CALL_METADATA_TOKEN_OVERHEAD;
}

function toDefinition(fn: {
  name: string;
  description?: string | null;
  parameters?: Record<string, unknown> | null;
}): ChatCompletionFunctionDefinition {
  const definition: ChatCompletionFunctionDefinition = { name: fn.name };
  if (fn.description) definition.description = fn.description;
  // A JSON Schema object; the renderer copes with unknown types and countFramed with worse.
  if (fn.parameters)
    definition.parameters = fn.parameters as unknown as ChatCompletionFunctionParameters;
  return definition;
}

/** `tool_choice` / `function_call` as the legacy option the formula knows. */
function functionCallOption(choice: unknown): ChatCompletionFunctionCallOption | undefined {
  if (choice === 'none') return 'none';
  if (typeof choice !== 'object' || choice === null) return undefined;
  const named = 'function' in choice ? (choice as { function?: unknown }).function : choice;
  const name = (named as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' ? { name } : undefined;
}

function responseFormatTokens(format: unknown, count: Count): number {
  if (typeof format !== 'object' || format === null) return 0;
  const schema = (format as { type?: unknown; json_schema?: unknown }).json_schema;
  return schema === undefined ? 0 : count(JSON.stringify(schema));
}
