import type {
  ChatPromptRequest,
  PromptContentPart,
  PromptMessage,
  PromptTool,
} from '@holdfast/tokenizer';
import type { UnseenInput } from '../../call/unseen.js';
import { walkFileIds, type NamedFiles } from '../file-ids.js';
import { sealedId } from './sealed.js';
import type { ResponsesContent, ResponsesItem, ResponsesRequest, ResponsesTool } from './schema.js';

/**
 * A Responses request as the chat request a tokenizer counts: `instructions` is a system
 * message, a string `input` a user message; message items keep their role (`input_text` /
 * `output_text` as text, `input_image` as an image part), a `function_call` is an assistant
 * tool call and its `function_call_output` (or `custom_tool_call_output`) a tool message, a
 * `reasoning` item its summary and reasoning text; any other item counts as its JSON. Function tools take the chat shape; a JSON schema
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
 * The input only the upstream can count (empty: the edge counts it all), by path: state kept
 * upstream (a previous response, a conversation, a stored prompt, an item by reference), files
 * (by id, URL or inline: billed by their pages), reasoning the model reads back (an item's
 * encrypted content, or a stored reasoning item by id: its whole reasoning, which its summary
 * does not show), any other sealed item (a compaction), and the items of tools the provider ran
 * (what they read or made is not in the item). Each one gets the model's allowance
 * (`upstreamStateAllowanceTokens`) when the upstream cannot count them.
 */
export function unseenState(body: ResponsesRequest): UnseenInput[] {
  const out: UnseenInput[] = [];
  const stored = (param: string, what: string) =>
    out.push({ param, what, billed: STORED, instead: 'Send the conversation as input instead' });
  if (body.previous_response_id) stored('previous_response_id', 'a previous response');
  if (body.conversation) stored('conversation', 'a conversation');
  if (body.prompt) stored('prompt', 'a stored prompt');
  const input = typeof body.input === 'string' ? [] : (body.input ?? []);
  for (const [i, item] of input.entries()) {
    const hidden = hiddenItem(item);
    if (hidden) out.push({ param: `input.${i}`, ...hidden });
    for (const field of ['content', 'output'] as const) {
      const parts = item[field];
      if (!Array.isArray(parts)) continue;
      for (const [j, part] of parts.entries()) {
        // A file inline (file_data) too: the provider reads it as its pages, text and images,
        // which its bytes do not show.
        if (part.file_id || part.type === 'input_file') {
          out.push({ param: `input.${i}.${field}.${j}`, what: 'a file' });
        }
      }
    }
  }
  return out;
}

const STORED = 'the provider bills what it keeps as input';
/** How the provider bills a reasoning item of the current turn (after the last user message). */
const REASONING = (where: string) =>
  `the provider bills the whole reasoning ${where} as input within the current turn, far more than its summary shows`;

/** The items of the tools the provider runs, which it may bill more for than they show. */
const PROVIDER_TOOL_ITEMS = new Set([
  'web_search_call',
  'file_search_call',
  'code_interpreter_call',
  'image_generation_call',
  'mcp_call',
  'mcp_list_tools',
]);

/** What an input item is when it carries input only the upstream can count. */
function hiddenItem(item: ResponsesItem): Omit<UnseenInput, 'param'> | undefined {
  const type = itemType(item);
  if (item.encrypted_content != null) {
    return type === 'reasoning'
      ? {
          what: 'a reasoning item with encrypted_content',
          billed: REASONING('sealed in it'),
          instead: LEAVE_OUT,
        }
      : {
          what: 'an item with encrypted_content',
          billed: 'the provider bills what it carries sealed as input',
          instead: LEAVE_OUT,
        };
  }
  if (type === 'reasoning' && item.id != null) {
    return {
      what: 'a reasoning item by id',
      billed: REASONING('it keeps for it'),
      instead: LEAVE_OUT,
    };
  }
  if (type === 'item_reference') {
    return { what: 'an item_reference', billed: STORED, instead: 'Send the item itself instead' };
  }
  if (PROVIDER_TOOL_ITEMS.has(type)) {
    return {
      what: `a ${type} item`,
      billed:
        'the provider may bill what its tool read or made as input, beyond what the item shows',
      instead: LEAVE_OUT,
    };
  }
  return undefined;
}

const LEAVE_OUT = 'Leave it out of the input';

/**
 * The ids of the stored items the input reads by id (the upstream reads them from what it
 * stored, whoever stored them: the authority admits the call only for their owner): an
 * `item_reference` (or an item of no type with an id), a reasoning item with an id and no
 * `encrypted_content` (its reasoning is read from the store), any other item that carries
 * its id and nothing else, and, unless `store` is false, every item that carries an id with
 * its content (OpenAI then reads the id against what it stored: a message's id links to the
 * reasoning it followed, a reasoning item's to its stored reasoning; a team's own output
 * items, replayed verbatim, are its own); the code execution containers its tools name by
 * id; the files its code wrote that it names by `file_id` (namedFiles); and the MCP approval
 * requests it answers (approvedRequests); and the sealed content it sends back (an item's
 * `encrypted_content`, by its digest: sealed.ts), whatever `store` says: the provider opens
 * any team's. Each id once.
 */
export function referencedItems(body: ResponsesRequest): string[] {
  const input = typeof body.input === 'string' ? [] : (body.input ?? []);
  const ids = new Set<string>();
  for (const container of toolContainers(body)) ids.add(container);
  for (const file of namedFiles(body).ids) ids.add(file);
  const stored = body.store !== false;
  for (const item of input) {
    if (typeof item.encrypted_content === 'string') ids.add(sealedId(item.encrypted_content));
    if (item.id == null) continue;
    const type = itemType(item);
    const only = Object.entries(item).every(([k, v]) => k === 'id' || k === 'type' || v == null);
    const byId =
      stored ||
      type === 'item_reference' ||
      (type === 'reasoning' && item.encrypted_content == null) ||
      only;
    if (byId) ids.add(item.id);
  }
  for (const id of approvedRequests(body)) ids.add(id);
  return [...ids];
}

/**
 * The MCP approval requests the input answers (`mcp_approval_response.approval_request_id`):
 * the provider runs the pending MCP call the request names, whoever's call asked for it (the
 * same upstream account), so a request is owned as a stored item is (its settle recorded it:
 * ResponsesTranscript.storedItemIds, whatever `store` says). A missing or non-string id is
 * left to the upstream, which refuses it.
 */
function approvedRequests(body: ResponsesRequest): string[] {
  const input = typeof body.input === 'string' ? [] : (body.input ?? []);
  return input.flatMap((item) => {
    const id = (item as { approval_request_id?: unknown }).approval_request_id;
    return item.type === 'mcp_approval_response' && typeof id === 'string' ? [id] : [];
  });
}

/**
 * The files the request names by `file_id` anywhere in its input (a message's `input_file` /
 * `input_image`, the output parts of a function or custom tool call, a computer call's
 * screenshot, ...), in a stored prompt's `variables`, or in its tools (a container's
 * `file_ids`, an image_generation tool's `input_image_mask`; not a function or custom tool's
 * own definition), each once, by their
 * kind (file-ids.ts): the owned ones are checked by the authority (another team's is refused);
 * `disguised` is the first that is disguised.
 */
export function namedFiles(body: ResponsesRequest): NamedFiles {
  let named = NAMED_FILES.get(body);
  if (!named) NAMED_FILES.set(body, (named = walkFiles(body)));
  return named;
}

/** namedFiles' answer per body: a call asks it three times (its admit, count, refusal). */
const NAMED_FILES = new WeakMap<ResponsesRequest, NamedFiles>();

function walkFiles(body: ResponsesRequest): NamedFiles {
  return walkFileIds([body.input, body.prompt, body.tools], toolDefinition);
}

/** A function or custom tool's own definition (its JSON schema, its grammar): never a file. */
const toolDefinition = (o: Record<string, unknown>, key: string) =>
  (key === 'parameters' || key === 'format') && (o.type === 'function' || o.type === 'custom');

/**
 * The containers the request's code_interpreter tools reuse by id: the provider keeps a
 * container's files for whoever names it (any team: the same upstream account), so it is owned
 * as a stored item is.
 */
export function toolContainers(body: ResponsesRequest): string[] {
  return (body.tools ?? []).flatMap((tool) => {
    const container = (tool as { container?: unknown }).container;
    return typeof container === 'string' ? [container] : [];
  });
}

/**
 * An item's type as OpenAI reads it: a message when left out, but an item with an id and no
 * type is a reference to a stored item (the type of an `item_reference` is optional).
 */
function itemType(item: ResponsesItem): string {
  return item.type ?? (item.id != null ? 'item_reference' : 'message');
}

function itemMessages(item: ResponsesItem): PromptMessage[] {
  const type = itemType(item);
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
    case 'custom_tool_call_output':
      return [{ role: 'tool', content: parts(item.output ?? '') }];
    case 'reasoning': {
      // What it shows: its summary and its reasoning text (open-weight models send the latter).
      const content = Array.isArray(item.content) ? item.content : [];
      const text = [...(item.summary ?? []), ...content].map((s) => s.text ?? '').join('');
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
