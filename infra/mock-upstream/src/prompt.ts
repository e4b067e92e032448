import {
  countChatPrompt,
  encodingForModel,
  loadTokenizer,
  type ChatPromptRequest,
} from '@holdfast/tokenizer';
import { countOpenWeight, type OpenWeightFamily } from './open-weight/index.js';
import { applyTemplate, countTemplateTokens, TEMPLATE_MODEL } from './template.js';

/**
 * What a provider bills for one file input (a chat `file` part, a Responses `input_file`, an
 * Anthropic `document` block) on top of its JSON: a file is read as its pages (the text and
 * an image of each), which no count of the request's own bytes can see. A flat figure, about
 * a two-page PDF, so a test can tell a gateway that counts the request from one that asks.
 */
export const FILE_INPUT_TOKENS = 3_000;

/**
 * Prompt tokens of a chat-shaped request, as the OpenAI surfaces bill them: OpenAI's chat
 * framing in the model's encoding, or for self-hosted (template) models the rendered chat
 * template, as llama-server counts it; each file part adds FILE_INPUT_TOKENS. The Responses
 * API is billed through this too, after its input is turned into messages (responses/input.ts),
 * so /v1/responses/input_tokens agrees. A model in `openWeight` (model id -> family) is billed as
 * vLLM bills it (open-weight/).
 */
export async function countPrompt(
  request: ChatPromptRequest,
  openWeight: Readonly<Record<string, OpenWeightFamily>> = {},
): Promise<number> {
  const files = FILE_INPUT_TOKENS * fileParts(request);
  const family = Object.hasOwn(openWeight, request.model) ? openWeight[request.model] : undefined;
  if (family) return files + countOpenWeight(family, request as never);
  if (TEMPLATE_MODEL.test(request.model)) {
    const rendered = applyTemplate({ messages: request.messages, tools: request.tools ?? null });
    return files + (await countTemplateTokens(rendered));
  }
  return files + countChatPrompt(request, await loadTokenizer(encodingForModel(request.model)));
}

function fileParts(request: ChatPromptRequest): number {
  let n = 0;
  for (const m of request.messages) {
    if (!Array.isArray(m.content)) continue;
    for (const part of m.content as readonly { type?: unknown }[])
      if (part.type === 'file' || part.type === 'input_file') n++;
  }
  return n;
}
