import { Err, Ok, type Result } from '@holdfast/runtime';
import type { PromptContentPart, PromptMessage, PromptTool } from '@holdfast/tokenizer';
import { countPrompt } from '../prompt.js';
import type { ReasoningSeal } from './sealed.js';
import type { ContextEntry, ResponseStore } from './store.js';
import type { InputTokensBody, ResponsesContent, ResponsesItem, ResponsesTool } from './schema.js';

/**
 * What a Responses call is billed for as input, one rule for `POST /v1/responses` and
 * `POST /v1/responses/input_tokens`: the request is turned into chat messages and counted with
 * the chat framing (prompt.ts). `instructions` is a system message; a string `input` a user
 * message; message items keep their role, with `input_text`/`output_text` as text and
 * `input_image` as an image part (priced by the vision formula); a `function_call` is an
 * assistant tool call and its `function_call_output` (or `custom_tool_call_output`) a tool
 * message; anything else counts as its JSON. With `previous_response_id` the stored conversation (its inputs and outputs, its
 * reasoning included, not its instructions, which OpenAI does not carry over) comes before
 * this call's input.
 *
 * Reasoning items, as OpenAI's reasoning models read them: one before the last user message
 * (an earlier turn) is dropped, free; one after it (the current turn: a function-calling loop)
 * puts the model's whole reasoning back in its context, billed as input. That is the reasoning
 * sealed in its `encrypted_content` (sealed.ts; content that does not verify is refused as
 * OpenAI refuses it), or kept with a stored response that its `id` names (an unknown id is a
 * 404, as OpenAI's for an item of a `store: false` response); a reasoning item with neither is
 * its shown text (summary and reasoning text). `item_reference` (its type may be left out) reads a stored response's
 * output item by id. Tools and `text.format` count as on chat.
 */
/** A refused input, as OpenAI's error says it: `code` is OpenAI's (null where it sends none). */
export interface InputRefusal {
  kind: 'invalid' | 'not_found';
  code: string | null;
  message: string;
  param: string | null;
}

export type CountedInput = Result<{ tokens: number; conversation: ContextEntry[] }, InputRefusal>;

/** What the input is read against: stored responses and items, and the seal of reasoning. */
export interface InputContext {
  store: ResponseStore;
  seal: ReasoningSeal;
}

export async function countInput(body: InputTokensBody, ctx: InputContext): Promise<CountedInput> {
  if (body.conversation !== undefined && body.conversation !== null) {
    return Err(
      invalid(
        'conversation: the mock keeps no conversations; use previous_response_id',
        'conversation',
      ),
    );
  }
  const previousId = body.previous_response_id;
  const previous = previousId ? ctx.store.get(previousId) : undefined;
  if (previousId && !previous) {
    return Err({
      kind: 'invalid',
      code: 'previous_response_not_found',
      message: `Previous response with id '${previousId}' not found.`,
      param: 'previous_response_id',
    });
  }
  const own = toEntries(body.input ?? [], ctx);
  if (own.ok && body.store !== false) {
    const missing = reasoningMissing(body.input ?? [], ctx, previous?.items);
    if (missing) return Err(missing);
  }
  if (!own.ok) return own;
  const conversation = [...(previous?.conversation ?? []), ...own.value];
  const read = contextRead(conversation);
  const messages: PromptMessage[] = body.instructions
    ? [{ role: 'system', content: body.instructions }, ...read.messages]
    : read.messages;
  const tokens = await countPrompt({
    model: body.model ?? 'gpt-4o',
    messages,
    tools: (body.tools ?? []).map(toChatTool),
    tool_choice: toChatToolChoice(body.tool_choice),
    response_format: toResponseFormat(body.text?.format),
  });
  return Ok({ tokens: tokens + read.hidden, conversation });
}

function invalid(message: string, param: string): InputRefusal {
  return { kind: 'invalid', code: null, message, param };
}

/**
 * What the model reads of a conversation: its messages, and the reasoning items of the current
 * turn (after the last user message) as their hidden tokens and shown text.
 */
function contextRead(entries: readonly ContextEntry[]): {
  messages: PromptMessage[];
  hidden: number;
} {
  const lastUser = entries.findLastIndex((e) => 'message' in e && e.message.role === 'user');
  const messages: PromptMessage[] = [];
  let hidden = 0;
  for (const [i, entry] of entries.entries()) {
    if ('message' in entry) messages.push(entry.message);
    else if (i > lastUser) {
      hidden += entry.reasoning.hidden;
      if (entry.reasoning.text) messages.push({ role: 'assistant', content: entry.reasoning.text });
    }
  }
  return { messages, hidden };
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

/** The input items as what the model reads, or why they cannot be read. */
function toEntries(
  input: string | readonly ResponsesItem[],
  ctx: InputContext,
): Result<ContextEntry[], InputRefusal> {
  if (typeof input === 'string') return Ok([{ message: { role: 'user', content: input } }]);
  const entries: ContextEntry[] = [];
  for (const [i, item] of input.entries()) {
    // An item with an id and neither type nor role refers to a stored item, as on OpenAI.
    const reference = item.id !== undefined && item.role === undefined;
    const type = item.type ?? (reference ? 'item_reference' : 'message');
    if (type === 'message') {
      if (!item.role || item.content === undefined)
        return Err(invalid(`input[${i}]: a message needs role and content`, 'input'));
      entries.push({ message: { role: item.role, content: parts(item.content) } });
    } else if (type === 'function_call') {
      const call = { name: item.name ?? '', arguments: item.arguments ?? '' };
      entries.push({
        message: {
          role: 'assistant',
          content: null,
          tool_calls: [{ type: 'function', function: call }],
        },
      });
    } else if (type === 'function_call_output' || type === 'custom_tool_call_output') {
      entries.push({ message: { role: 'tool', content: parts(item.output ?? '') } });
    } else if (typeof item.encrypted_content === 'string') {
      const hidden = type === 'reasoning' ? ctx.seal.open(item.encrypted_content) : undefined;
      if (hidden === undefined) return Err(unverified(item.encrypted_content));
      entries.push({ reasoning: { hidden, text: '' } });
    } else if (item.id !== undefined && (type === 'reasoning' || type === 'item_reference')) {
      const stored = ctx.store.item(item.id);
      if (!stored) return Err(notFound(item.id));
      entries.push(...stored);
    } else if (type === 'item_reference') {
      return Err(invalid(`input[${i}]: item_reference needs an id`, 'input'));
    } else if (type === 'reasoning') {
      entries.push({ reasoning: { hidden: 0, text: shownText(item) } });
    } else if (type === 'mcp_approval_response' && !approvable(item, input, ctx)) {
      // It approves (or denies) a call the model asked for: one OpenAI knows, stored or sent.
      const id = (item as { approval_request_id?: unknown }).approval_request_id;
      return Err(notFound(typeof id === 'string' ? id : ''));
    } else {
      entries.push({ message: { role: 'user', content: JSON.stringify(item) } });
    }
  }
  return Ok(entries);
}

/**
 * Whether an `mcp_approval_response` names an approval request the model made: one of a stored
 * response, or an `mcp_approval_request` item of the same input (a `store: false` conversation
 * sent back).
 */
function approvable(
  item: ResponsesItem,
  input: readonly ResponsesItem[],
  ctx: InputContext,
): boolean {
  const id = (item as { approval_request_id?: unknown }).approval_request_id;
  if (typeof id !== 'string') return false;
  if (ctx.store.item(id)) return true;
  return input.some((i) => i.type === 'mcp_approval_request' && i.id === id);
}

/** A reasoning item's summary and reasoning text. */
function shownText(item: ResponsesItem): string {
  const content = Array.isArray(item.content) ? item.content : [];
  return [...(item.summary ?? []), ...content].map((p) => p.text ?? '').join('');
}

/**
 * With store on, OpenAI reads the id of a whole item against what it stored: a reasoning model's
 * function call (or message) needs the reasoning item it followed in the same input (or in the
 * previous response), else the 400 OpenAI answers.
 */
function reasoningMissing(
  input: string | readonly ResponsesItem[],
  ctx: InputContext,
  previous: ReadonlyMap<string, ContextEntry[]> | undefined,
): InputRefusal | undefined {
  if (typeof input === 'string') return undefined;
  const seen = new Set<string>();
  for (const item of input) {
    const type = item.type ?? 'message';
    const needs =
      item.id !== undefined && (type === 'function_call' || (type === 'message' && item.role))
        ? ctx.store.reasoningBefore(item.id)
        : undefined;
    if (needs !== undefined && !seen.has(needs) && !previous?.has(needs)) {
      return {
        kind: 'invalid',
        code: null,
        message: `Item '${item.id}' of type '${type}' was provided without its required 'reasoning' item: '${needs}'.`,
        param: 'input',
      };
    }
    if (item.id !== undefined) seen.add(item.id);
  }
  return undefined;
}

/** OpenAI's answer to encrypted content it did not seal (or that was altered). */
function unverified(content: string): InputRefusal {
  const shown = content.length > 8 ? `${content.slice(0, 4)}...${content.slice(-4)}` : content;
  return {
    kind: 'invalid',
    code: 'invalid_encrypted_content',
    message: `The encrypted content ${shown} could not be verified. Reason: Encrypted content could not be decrypted or parsed.`,
    param: null,
  };
}

/** OpenAI's answer to an item id it does not keep (an item of a `store: false` response). */
function notFound(id: string): InputRefusal {
  return {
    kind: 'not_found',
    code: null,
    message: `Item with id '${id}' not found. Items are not persisted when \`store\` is set to false. Try again with \`store\` set to true, or remove this item from your input.`,
    param: 'input',
  };
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
