import {
  countChatPrompt,
  encodingForModel,
  loadTokenizer,
  type ChatPromptRequest,
} from '@holdfast/tokenizer';
import { applyTemplate, countTemplateTokens, TEMPLATE_MODEL } from './template.js';

/**
 * Prompt tokens of a chat-shaped request, as the OpenAI surfaces bill them: OpenAI's chat
 * framing in the model's encoding, or for self-hosted (template) models the rendered chat
 * template, as llama-server counts it. The Responses API is billed through this too, after its
 * input is turned into messages (responses/input.ts), so /v1/responses/input_tokens agrees.
 */
export async function countPrompt(request: ChatPromptRequest): Promise<number> {
  if (TEMPLATE_MODEL.test(request.model)) {
    return countTemplateTokens(
      applyTemplate({ messages: request.messages, tools: request.tools ?? null }),
    );
  }
  return countChatPrompt(request, await loadTokenizer(encodingForModel(request.model)));
}
