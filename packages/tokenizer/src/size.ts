import type { ChatPromptRequest, EmbeddingInput, PromptContentPart } from './types.js';

/**
 * How many characters of an image's data URL the counter reads (image-size.ts decodes at most
 * its first 256 KiB), weighted down: decoding base64 costs far less a character than a BPE
 * count (a full header, 0.3 ms, counts as 11,000 characters).
 */
const IMAGE_URL_CHARS_READ = 350_000;
const IMAGE_URL_WEIGHT = 1 / 32;

/**
 * A cheap measure of how much text counting a request reads (UTF-16 code units): every string
 * the counter tokenizes (message text, tool definitions and calls, a JSON schema, parts counted
 * as their JSON, such as audio) and, weighted down, the image headers it decodes. Strings are
 * measured by their length, so this costs a walk of the request, not of its text.
 */
export function chatPromptChars(request: ChatPromptRequest): number {
  let chars = 0;
  for (const message of request.messages) {
    const { content } = message;
    if (typeof content === 'string') chars += content.length;
    else if (content) for (const part of content) chars += partChars(part);
    chars += (message.refusal?.length ?? 0) + (message.name?.length ?? 0);
    if (message.tool_calls) chars += jsonChars(message.tool_calls);
    if (message.function_call) chars += jsonChars(message.function_call);
  }
  if (request.tools) chars += jsonChars(request.tools);
  if (request.functions) chars += jsonChars(request.functions);
  if (request.response_format) chars += jsonChars(request.response_format);
  return chars;
}

function partChars(part: PromptContentPart): number {
  // The same cases as the counters (chat.ts, estimate.ts, family/messages.ts).
  if (part.type === 'text' && typeof part.text === 'string') return part.text.length;
  if (part.type === 'refusal' && typeof part.refusal === 'string') return part.refusal.length;
  const url = part.image_url?.url;
  if (part.type === 'image_url' && typeof url === 'string') {
    return Math.ceil(Math.min(url.length, IMAGE_URL_CHARS_READ) * IMAGE_URL_WEIGHT);
  }
  // Audio, files and unknown parts are counted as their JSON text.
  return jsonChars(part);
}

export function embeddingInputChars(input: EmbeddingInput): number {
  if (typeof input === 'string') return input.length;
  let chars = 0;
  for (const item of input) if (typeof item === 'string') chars += item.length;
  return chars;
}

/**
 * About the length of a value's JSON text (each string's length and quotes, keys, a few
 * characters per number and separator), walked without recursion so no nesting depth can
 * overflow the stack.
 */
export function jsonChars(value: unknown): number {
  let chars = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') chars += v.length + 2;
    else if (typeof v !== 'object' || v === null) chars += 8;
    else if (Array.isArray(v)) {
      chars += 2 + v.length;
      for (const item of v as unknown[]) stack.push(item);
    } else {
      chars += 2;
      for (const key in v) {
        chars += key.length + 4;
        stack.push((v as Record<string, unknown>)[key]);
      }
    }
  }
  return chars;
}
