import type { ChatPromptRequest, EmbeddingInput } from './types.js';

/**
 * A cheap measure of how much text a request carries (UTF-16 code units), used to decide
 * whether counting it inline would hold the event loop too long. Image URLs do not count:
 * only their header is read.
 */
export function chatPromptChars(request: ChatPromptRequest): number {
  let chars = 0;
  for (const message of request.messages) {
    const { content } = message;
    if (typeof content === 'string') chars += content.length;
    else if (content) {
      for (const part of content) chars += part.text?.length ?? part.refusal?.length ?? 0;
    }
    for (const call of message.tool_calls ?? []) chars += call.function?.arguments?.length ?? 0;
  }
  if (request.tools) chars += JSON.stringify(request.tools).length;
  if (request.functions) chars += JSON.stringify(request.functions).length;
  return chars;
}

export function embeddingInputChars(input: EmbeddingInput): number {
  if (typeof input === 'string') return input.length;
  let chars = 0;
  for (const item of input) if (typeof item === 'string') chars += item.length;
  return chars;
}
