import { TOOLS_HEAD, TOOLS_TAIL } from '../template.js';
import { dumps, type PyValue } from './python-json.js';

/** A chat message as vLLM hands it to a chat template: text content, parsed tool calls. */
export interface TemplateMessage {
  role: string;
  content: string;
  reasoning_content?: string | null;
  tool_calls?: { name: string; arguments: PyValue }[];
}

const strip = (s: string, edge: 'both' | 'left' | 'right') => {
  let start = 0;
  let end = s.length;
  if (edge !== 'right') while (start < end && s[start] === '\n') start++;
  if (edge !== 'left') while (end > start && s[end - 1] === '\n') end--;
  return s.slice(start, end);
};

/**
 * Qwen 3's chat template (its tokenizer_config.json `chat_template`, the thinking one) written
 * out by hand, statement for statement, with `add_generation_prompt` true and `enable_thinking`
 * unset: a second renderer beside the edge's Jinja one, so each can catch the other.
 */
export function renderQwen3(messages: readonly TemplateMessage[], tools: PyValue[] | null): string {
  let out = '';
  const first = messages[0];
  if (tools && tools.length > 0) {
    out += '<|im_start|>system\n';
    if (first?.role === 'system') out += `${first.content}\n\n`;
    out += TOOLS_HEAD;
    for (const tool of tools) out += `\n${dumps(tool)}`;
    out += `${TOOLS_TAIL}<|im_end|>\n`;
  } else if (first?.role === 'system') {
    out += `<|im_start|>system\n${first.content}<|im_end|>\n`;
  }
  // The last user turn that is not a tool response: thinking shows after it only.
  let lastQuery = messages.length - 1;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    const response =
      m.content.startsWith('<tool_response>') && m.content.endsWith('</tool_response>');
    if (m.role === 'user' && !response) {
      lastQuery = i;
      break;
    }
  }
  messages.forEach((m, i) => {
    const last = i === messages.length - 1;
    if (m.role === 'user' || (m.role === 'system' && i > 0)) {
      out += `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`;
    } else if (m.role === 'assistant') {
      let content = m.content;
      let reasoning = '';
      if (m.reasoning_content != null) reasoning = m.reasoning_content;
      else if (content.includes('</think>')) {
        const parts = content.split('</think>');
        content = strip(parts[parts.length - 1]!, 'left');
        const before = strip(parts[0]!, 'right').split('<think>');
        reasoning = strip(before[before.length - 1]!, 'left');
      }
      if (i > lastQuery && (last || reasoning)) {
        out += `<|im_start|>${m.role}\n<think>\n${strip(reasoning, 'both')}\n</think>\n\n${strip(content, 'left')}`;
      } else out += `<|im_start|>${m.role}\n${content}`;
      (m.tool_calls ?? []).forEach((call, j) => {
        if ((j === 0 && content) || j > 0) out += '\n';
        const args = typeof call.arguments === 'string' ? call.arguments : dumps(call.arguments);
        out += `<tool_call>\n{"name": "${call.name}", "arguments": ${args}}\n</tool_call>`;
      });
      out += '<|im_end|>\n';
    } else if (m.role === 'tool') {
      if (i === 0 || messages[i - 1]!.role !== 'tool') out += '<|im_start|>user';
      out += `\n<tool_response>\n${m.content}\n</tool_response>`;
      if (last || messages[i + 1]!.role !== 'tool') out += '<|im_end|>\n';
    }
  });
  return `${out}<|im_start|>assistant\n`;
}
