import { Err, Ok, type Result } from '@holdfast/runtime';
import type { PromptContentPart, PromptMessage, PromptTool } from '@holdfast/tokenizer';
import { countPrompt } from '../prompt.js';
import type { ResponseStore } from './store.js';
import type { InputTokensBody, ResponsesContent, ResponsesItem, ResponsesTool } from './schema.js';

/**
 * What a Responses call is billed for as input, one rule for `POST /v1/responses` and
 * `POST /v1/responses/input_tokens`: the request is turned into chat messages and counted with
 * the chat framing (prompt.ts). `instructions` is a system message; a string `input` a user
 * message; message items keep their role, with `input_text`/`output_text` as text and
 * `input_image` as an image part (priced by the vision formula); a `function_call` is an
 * assistant tool call and its `function_call_output` a tool message; `reasoning` items are
 * free; anything else counts as its JSON. With `previous_response_id` the stored conversation
 * (its inputs and outputs, not its instructions, which OpenAI does not carry over) comes
 * before this call's input. Tools and `text.format` count as on chat.
 */
/** A refused input, as OpenAI's error names it: `code` is OpenAI's (null where it sends none). */
export interface InputRefusal {
  code: string | null;
  message: string;
  param: string;
}

export type CountedInput = Result<
  { tokens: number; conversation: PromptMessage[]; own: PromptMessage[] },
  InputRefusal
>;

export async function countInput(
  body: InputTokensBody,
  store: ResponseStore,
): Promise<CountedInput> {
  if (body.conversation !== undefined && body.conversation !== null) {
    return refuse(
      'conversation: the mock keeps no conversations; use previous_response_id',
      'conversation',
    );
  }
  const previousId = body.previous_response_id;
  const previous = previousId ? store.get(previousId) : undefined;
  if (previousId && !previous) {
    return Err({
      code: 'previous_response_not_found',
      message: `Previous response with id '${previousId}' not found.`,
      param: 'previous_response_id',
    });
  }
  const own = toMessages(body.input ?? []);
  if (typeof own === 'string') return refuse(own, 'input');
  const conversation = [...(previous?.conversation ?? []), ...own];
  const messages: PromptMessage[] = body.instructions
    ? [{ role: 'system', content: body.instructions }, ...conversation]
    : conversation;
  const tokens = await countPrompt({
    model: body.model ?? 'gpt-4o',
    messages,
    tools: (body.tools ?? []).map(toChatTool),
    tool_choice: toChatToolChoice(body.tool_choice),
    response_format: toResponseFormat(body.text?.format),
  });
  return Ok({ tokens, conversation, own });
}

function refuse(message: string, param: string): CountedInput {
  return Err({ code: null, message, param });
}

function parts(content: ResponsesContent): string | PromptContentPart[] {
  if (typeof content === 'string') return content;
  return content.map((part): PromptContentPart => {
    if (
      (part.type === 'input_text' || part.type === 'output_text') &&
      typeof part.text === 'string'
    ) {
      return { type: 'text', text: part.text };
    }
    if (part.type === 'refusal' && typeof part.refusal === 'string')
      return { type: 'refusal', refusal: part.refusal };
    if (part.type === 'input_image' && typeof part.image_url === 'string') {
      return { type: 'image_url', image_url: { url: part.image_url, detail: part.detail ?? null } };
    }
    return part as PromptContentPart;
  });
}

/** The input items as chat messages, or why they cannot be read. */
function toMessages(input: string | readonly ResponsesItem[]): PromptMessage[] | string {
  if (typeof input === 'string') return [{ role: 'user', content: input }];
  const messages: PromptMessage[] = [];
  for (const [i, item] of input.entries()) {
    const type = item.type ?? 'message';
    if (type === 'message') {
      if (!item.role || item.content === undefined)
        return `input[${i}]: a message needs role and content`;
      messages.push({ role: item.role, content: parts(item.content) });
    } else if (type === 'function_call') {
      messages.push({
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            type: 'function',
            function: { name: item.name ?? '', arguments: item.arguments ?? '' },
          },
        ],
      });
    } else if (type === 'function_call_output') {
      const output = item.output ?? '';
      messages.push({ role: 'tool', content: parts(output) });
    } else if (type === 'item_reference') {
      return `input[${i}]: item_reference is not supported by the mock`;
    } else if (type !== 'reasoning') {
      messages.push({ role: 'user', content: JSON.stringify(item) });
    }
  }
  return messages;
}

function toChatTool(tool: ResponsesTool): PromptTool {
  if (tool.type !== 'function' || !tool.name) return tool;
  return {
    type: 'function',
    function: {
      name: tool.name,
      description: tool.description ?? null,
      parameters: tool.parameters ?? null,
    },
  };
}

function toChatToolChoice(choice: unknown): unknown {
  if (typeof choice !== 'object' || choice === null) return choice;
  const { type, name } = choice as { type?: unknown; name?: unknown };
  return type === 'function' && typeof name === 'string'
    ? { type: 'function', function: { name } }
    : choice;
}

function toResponseFormat(format: unknown): unknown {
  if (typeof format !== 'object' || format === null) return undefined;
  const { type, ...schema } = format as { type?: unknown };
  return type === 'json_schema' ? { type, json_schema: schema } : undefined;
}
