import type {
  ChatPromptRequest,
  PromptContentPart,
  PromptMessage,
  PromptTool,
} from '@holdfast/tokenizer';
import type { ResponsesContent, ResponsesItem, ResponsesRequest, ResponsesTool } from './schema.js';

/**
 * A Responses request as the chat request a tokenizer counts: `instructions` is a system
 * message, a string `input` a user message; message items keep their role (`input_text` /
 * `output_text` as text, `input_image` as an image part), a `function_call` is an assistant
 * tool call and its `function_call_output` a tool message, a `reasoning` item its summary
 * text; any other item counts as its JSON. Function tools take the chat shape; a JSON schema
 * `text.format` counts as a response format. Counted with the chat framing, this is what
 * OpenAI bills for the input (and exactly what the mock upstream bills).
 */
export function asChatPrompt(body: ResponsesRequest, model: string): ChatPromptRequest {
  const messages: PromptMessage[] = body.instructions
    ? [{ role: 'system', content: body.instructions }]
    : [];
  const input = body.input ?? [];
  if (typeof input === 'string') messages.push({ role: 'user', content: input });
  else for (const item of input) messages.push(...itemMessages(item));
  return {
    model,
    messages,
    tools: (body.tools ?? []).map(chatTool),
    tool_choice: chatToolChoice(body.tool_choice),
    response_format: responseFormat(body.text?.format),
  };
}

/**
 * Why the call's input is not all in the request (empty: it is): every piece of state kept
 * upstream that only the upstream can count. Previous responses, conversations and stored
 * prompts; input items that reference stored items; files, by id, URL or inline. Each one gets
 * the model's allowance (`upstreamStateAllowanceTokens`) when the upstream cannot count them.
 */
export function unseenState(body: ResponsesRequest): string[] {
  const out: string[] = [];
  if (body.previous_response_id) out.push('previous_response_id');
  if (body.conversation) out.push('conversation');
  if (body.prompt) out.push('prompt');
  const input = typeof body.input === 'string' ? [] : (body.input ?? []);
  for (const [i, item] of input.entries()) {
    if (item.type === 'item_reference') out.push(`input[${i}] (item_reference)`);
    const parts = [item.content, item.output].flatMap((c) => (Array.isArray(c) ? c : []));
    for (const part of parts) {
      // A file inline (file_data) too: the provider reads it as its pages, text and images,
      // which its bytes do not show.
      if (part.file_id || part.type === 'input_file') {
        out.push(`input[${i}] (a file only the upstream can count)`);
      }
    }
  }
  return out;
}

function itemMessages(item: ResponsesItem): PromptMessage[] {
  const type = item.type ?? 'message';
  switch (type) {
    case 'message':
      return [{ role: item.role ?? 'user', content: parts(item.content ?? '') }];
    case 'function_call':
      return [
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            {
              type: 'function',
              function: { name: item.name ?? '', arguments: item.arguments ?? '' },
            },
          ],
        },
      ];
    case 'function_call_output':
      return [{ role: 'tool', content: parts(item.output ?? '') }];
    case 'reasoning': {
      const text = (item.summary ?? []).map((s) => s.text ?? '').join('');
      return text ? [{ role: 'assistant', content: text }] : [];
    }
    default:
      return [{ role: 'user', content: JSON.stringify(item) }];
  }
}

function parts(content: ResponsesContent): string | PromptContentPart[] {
  if (typeof content === 'string') return content;
  return content.map((part): PromptContentPart => {
    if ((part.type === 'input_text' || part.type === 'output_text') && part.text != null) {
      return { type: 'text', text: part.text };
    }
    if (part.type === 'refusal' && part.refusal != null) {
      return { type: 'refusal', refusal: part.refusal };
    }
    if (part.type === 'input_image' && part.image_url) {
      return { type: 'image_url', image_url: { url: part.image_url, detail: part.detail ?? null } };
    }
    return part as PromptContentPart;
  });
}

function chatTool(tool: ResponsesTool): PromptTool {
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

function chatToolChoice(choice: ResponsesRequest['tool_choice']): unknown {
  if (typeof choice !== 'object' || choice === null) return choice ?? undefined;
  const { type, name } = choice as { type: string; name?: unknown };
  return type === 'function' && typeof name === 'string'
    ? { type: 'function', function: { name } }
    : choice;
}

function responseFormat(format: unknown): unknown {
  if (typeof format !== 'object' || format === null) return undefined;
  const { type, ...schema } = format as { type?: unknown };
  return type === 'json_schema' ? { type, json_schema: schema } : undefined;
}
