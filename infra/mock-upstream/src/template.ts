import { loadTokenizer } from '@holdfast/tokenizer';

/**
 * The llama-server side of prompt counting (SPEC section 3, tokenizer `upstream`): models whose
 * name matches are "self-hosted": the mock renders their chat template (ChatML) and counts the
 * rendered prompt with /tokenize, exactly as llama-server's /apply-template + /tokenize would,
 * and reports that as usage.prompt_tokens.
 */
export const TEMPLATE_MODEL = /^(llama|smollm|qwen|mistral)/i;

interface Message {
  role?: unknown;
  content?: unknown;
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

/** ChatML, with the assistant primer at the end (what the model continues from). */
export function applyTemplate(messages: readonly Message[]): string {
  const turns = messages.map(
    (m) =>
      `<|im_start|>${typeof m.role === 'string' ? m.role : 'user'}\n${text(m.content)}<|im_end|>\n`,
  );
  return `${turns.join('')}<|im_start|>assistant\n`;
}

/** Tokens of a text (o200k; special-token text counted as plain text). */
export async function countTemplateTokens(content: string): Promise<number> {
  return (await loadTokenizer('o200k_base')).countText(content);
}
