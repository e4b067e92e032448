import { loadTokenizer } from '@holdfast/tokenizer';

/**
 * The llama-server side of prompt counting (docs/configuration.md, tokenizer `upstream`): models whose
 * name matches are "self-hosted": the mock renders their chat template and counts the rendered
 * prompt, exactly as llama-server's /apply-template + /tokenize would, and reports that as
 * usage.prompt_tokens. llama-server's /apply-template runs the same request parsing as
 * /v1/chat/completions minus inference, so whatever the template renders counts: the messages
 * (tool calls and tool results included) and the `tools` list. `response_format` and
 * `json_schema` do not: llama-server compiles them into a sampling grammar, not prompt text.
 */
export const TEMPLATE_MODEL = /^(llama|smollm|qwen|mistral)/i;

interface Message {
  role?: unknown;
  content?: unknown;
  tool_calls?: unknown;
}

export interface TemplateRequest {
  messages: readonly Message[];
  tools?: readonly unknown[] | null;
}

function text(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((p: { type?: unknown; text?: unknown }) =>
        p?.type === 'text' && typeof p.text === 'string' ? p.text : '',
      )
      .join('');
  }
  return '';
}

// Qwen 3's template (ChatML), the family the mock's template models stand for.
export const TOOLS_HEAD =
  '# Tools\n\nYou may call one or more functions to assist with the user query.\n\n' +
  'You are provided with function signatures within <tools></tools> XML tags:\n<tools>';
export const TOOLS_TAIL =
  '\n</tools>\n\nFor each function call, return a json object with function name and arguments ' +
  'within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, ' +
  '"arguments": <args-json-object>}\n</tool_call>';

function toolCalls(calls: unknown): string {
  if (!Array.isArray(calls)) return '';
  return calls
    .map((c: { function?: { name?: unknown; arguments?: unknown } }) => {
      const name = JSON.stringify(c?.function?.name ?? '');
      const args = c?.function?.arguments;
      const rendered = typeof args === 'string' ? args : JSON.stringify(args ?? {});
      return `\n<tool_call>\n{"name": ${name}, "arguments": ${rendered}}\n</tool_call>`;
    })
    .join('');
}

function turn(m: Message): string {
  const role = typeof m.role === 'string' ? m.role : 'user';
  if (role === 'tool') {
    return `<|im_start|>user\n<tool_response>\n${text(m.content)}\n</tool_response><|im_end|>\n`;
  }
  return `<|im_start|>${role}\n${text(m.content)}${toolCalls(m.tool_calls)}<|im_end|>\n`;
}

/** The rendered prompt, with the assistant primer at the end (what the model continues from). */
export function applyTemplate({ messages, tools }: TemplateRequest): string {
  let rest = messages;
  let head = '';
  if (tools && tools.length > 0) {
    // The tool list joins the system turn, after the system message if there is one.
    const first = messages[0];
    const system = first?.role === 'system' ? `${text(first.content)}\n\n` : '';
    if (system) rest = messages.slice(1);
    const listed = tools.map((t) => `\n${JSON.stringify(t)}`).join('');
    head = `<|im_start|>system\n${system}${TOOLS_HEAD}${listed}${TOOLS_TAIL}<|im_end|>\n`;
  }
  return `${head}${rest.map(turn).join('')}<|im_start|>assistant\n`;
}

/** Tokens of a text (o200k; special-token text counted as plain text). */
export async function countTemplateTokens(content: string): Promise<number> {
  return (await loadTokenizer('o200k_base')).countText(content);
}
