import type {
  ChatPromptRequest,
  PromptContentPart,
  PromptMessage,
  PromptTool,
} from '@holdfast/tokenizer';
import type { CountTokensRequest, MessagesBlock, MessagesTool } from './schema.js';

type Block = MessagesBlock & Record<string, unknown>;

/** A string field as text; anything else (a tool result's blocks aside) as its JSON. */
const str = (v: unknown) => (typeof v === 'string' ? v : v == null ? '' : JSON.stringify(v));

/**
 * A Messages request as the chat request a local tokenizer counts (the `estimate` bound, or an
 * encoding the operator chose): `system` a system message; text blocks text parts, images
 * image parts (the bound prices each at Anthropic's own formula for a Claude model, at most
 * 1,640 for its largest image, and never under the SPEC's flat 1,600); a
 * `tool_use` an assistant tool call with its id and its input as JSON, a `tool_result` a tool
 * message with its tool_use_id, thinking its text; any other block counts as its JSON. A custom
 * tool takes the chat shape, its input_schema as parameters; one that carries more fields
 * (input_examples, ...), which Anthropic renders and bills too, and any other tool count as
 * their JSON. What Anthropic adds that the request does not show is counted apart (hidden.ts).
 * Claude's tokenizer is not public: `tokenizer: upstream` (count_tokens) is exact, this is the
 * fallback.
 */
export function asChatPrompt(body: CountTokensRequest, model: string): ChatPromptRequest {
  const messages: PromptMessage[] = [];
  if (typeof body.system === 'string') messages.push({ role: 'system', content: body.system });
  else if (body.system?.length) messages.push({ role: 'system', content: parts(body.system) });
  for (const message of body.messages) {
    if (typeof message.content === 'string') {
      messages.push({ role: message.role, content: message.content });
      continue;
    }
    const own: Block[] = [];
    for (const block of message.content as Block[]) {
      if (block.type === 'tool_use') {
        const call = {
          name: str(block.name),
          arguments: JSON.stringify(block.input ?? {}),
        };
        messages.push({
          role: 'assistant',
          content: null,
          tool_calls: [{ id: str(block.id), type: 'function', function: call }],
        });
      } else if (block.type === 'tool_result') {
        const content = block.content;
        const result = Array.isArray(content) ? parts(content as Block[]) : str(content);
        messages.push({ role: 'tool', tool_call_id: str(block.tool_use_id), content: result });
      } else {
        own.push(block);
      }
    }
    if (own.length > 0) messages.push({ role: message.role, content: parts(own) });
  }
  return {
    model,
    messages,
    tools: (body.tools ?? []).map(chatTool),
    tool_choice: chatToolChoice(body.tool_choice),
  };
}

function parts(blocks: readonly Block[]): PromptContentPart[] {
  return blocks.map((block): PromptContentPart => {
    const { cache_control: _, ...b } = block;
    if (b.type === 'text') return { type: 'text', text: String(b.text ?? '') };
    if (b.type === 'thinking') return { type: 'text', text: str(b.thinking) };
    if (b.type === 'image') return { type: 'image_url', image_url: { url: imageUrl(b.source) } };
    return b as PromptContentPart;
  });
}

/** An image source as a URL the vision counter reads (a data URL keeps the size readable). */
function imageUrl(source: unknown): string {
  const s = source as { type?: unknown; media_type?: unknown; data?: unknown; url?: unknown };
  if (s?.type === 'base64' && typeof s.data === 'string') {
    return `data:${String(s.media_type)};base64,${s.data}`;
  }
  return typeof s?.url === 'string' ? s.url : 'image';
}

/** The fields of a custom tool the chat shape carries (its cache_control is not prompt). */
const CHAT_TOOL_FIELDS: ReadonlySet<string> = new Set([
  'type',
  'name',
  'description',
  'input_schema',
]);

function chatTool(tool: MessagesTool): PromptTool {
  const { cache_control: _, ...definition } = tool;
  const custom = !definition.type || definition.type === 'custom';
  if (!custom || Object.keys(definition).some((field) => !CHAT_TOOL_FIELDS.has(field))) {
    return { ...definition, type: definition.type ?? 'custom' };
  }
  return {
    type: 'function',
    function: {
      name: definition.name,
      description: definition.description ?? null,
      parameters: definition.input_schema ?? null,
    },
  };
}

function chatToolChoice(choice: CountTokensRequest['tool_choice']): unknown {
  if (!choice) return undefined;
  if (choice.type === 'any') return 'required';
  if (choice.type === 'tool' && choice.name) {
    return { type: 'function', function: { name: choice.name } };
  }
  return choice.type;
}
