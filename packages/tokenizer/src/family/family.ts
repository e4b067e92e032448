import { Template } from '@huggingface/jinja';
import { estimateChatPrompt, ESTIMATE_INPUT_SPECIALS } from '../estimate.js';
import type { ChatPromptRequest } from '../types.js';
import { outsideTokens, templateInput, type TemplateInput } from './messages.js';
import { hasMarkers, pythonNumbers } from './python-json.js';
import type { Vocab } from './vocab.js';

/** How one family renders its chat template: the vocabulary's own, plus fixed variables. */
export interface FamilySpec {
  /** Path of the family's tokenizer.json (tokenizer_config.json lies beside it). */
  vocab: () => string;
  /** Extra template variables (Llama 3.1's template dates its system header 26 Jul 2024). */
  variables?: Record<string, unknown>;
}

export interface FamilyCounter {
  countText(text: string): number;
  countChat(request: ChatPromptRequest): number;
  /** The prompt as the template renders it (special-token text in content left as sent). */
  render(request: ChatPromptRequest, addGenerationPrompt?: boolean): string;
  readonly inputSpecials: number;
  readonly vocab: Vocab;
}

/** Special-token text found in user strings is swapped for these markers while rendering. */
const MARKER = /\uFDD0(\d+)\uFDD1/g;

/**
 * Exact prompt counts for an open-weight family: the request rendered with the model's Hugging
 * Face chat template (`add_generation_prompt`, tools passed to it, numbers in tool-call arguments
 * printed as Python prints them), then tokenized as the server tokenizes it. Special-token text in anything the client sent (`<|eot_id|>` in a message) is
 * counted both ways, parsed as the special token (vLLM, llama.cpp) and as plain text
 * (mistral-common), and the larger count wins, so no server counts more. A request the template
 * refuses (roles that do not alternate for Gemma, a Mistral tool-call id that is not 9
 * characters, a null content Llama 3.0 cannot trim) is one the server refuses too (or renders
 * oddly); it is counted with the `estimate` bound rather than failing here. Embeddings inputs
 * get at least 2 special tokens (BOS/EOS) whatever the vocabulary's post-processor says: the
 * packaged Llama 3 one adds no BOS, Meta's does.
 */
export function familyCounter(vocab: Vocab, spec: FamilySpec): FamilyCounter {
  const template = new Template(String(vocab.config.chat_template));
  const tokens = specialTokenVariables(vocab);

  /** The prompt the server renders: the template's text, with Python's numbers in it. */
  const renderInput = (input: TemplateInput, addGenerationPrompt: boolean): string =>
    pythonNumbers(
      template.render({
        ...tokens,
        ...spec.variables,
        messages: input.messages,
        tools: input.tools,
        add_generation_prompt: addGenerationPrompt,
      }),
      input.numbers,
    );

  /**
   * Whether the template prints a tool call's `arguments` string as it is (Qwen 3's `is string`
   * branch), rather than quoting it (`| tojson`: llama.cpp then parses it, as vLLM always does).
   */
  let printsString: boolean | undefined;
  const printsStringArguments = (): boolean => {
    if (printsString !== undefined) return printsString;
    const args = '{"probe":  1}';
    const call = {
      id: 'call_probe',
      type: 'function',
      function: { name: 'probe', arguments: args },
    };
    // With content "" and null: DeepSeek V3's prints the calls only when it is null.
    printsString = ['', null].some((content) => {
      try {
        const rendered = template.render({
          ...tokens,
          ...spec.variables,
          messages: [
            { role: 'user', content: 'hi' },
            { role: 'assistant', content, tool_calls: [call] },
          ],
          add_generation_prompt: false,
        });
        return rendered.includes(args);
      } catch {
        return false;
      }
    });
    return printsString;
  };

  /** Tokens of a rendered prompt, with the client's special-token text counted both ways. */
  const countRendered = (rendered: string, lookalikes: string[]): number => {
    if (lookalikes.length === 0) return vocab.countParsed(rendered);
    const unmask = (text: string) => text.replace(MARKER, (m, i: string) => lookalikes[+i] ?? m);
    // Template specials as specials, the client's special-token text as text.
    let plain = 0;
    let run = '';
    for (const piece of vocab.splitSpecials(rendered)) {
      if (vocab.isSpecial(piece)) {
        plain += vocab.countPlain(unmask(run)) + 1;
        run = '';
      } else run += piece;
    }
    plain += vocab.countPlain(unmask(run));
    return Math.max(vocab.countParsed(unmask(rendered)), plain);
  };

  return {
    vocab,
    inputSpecials: Math.max(vocab.inputSpecials, ESTIMATE_INPUT_SPECIALS),
    countText: (text) => vocab.countPlain(text),
    render: (request, addGenerationPrompt = true) =>
      renderInput(templateInput(request), addGenerationPrompt),
    countChat(request) {
      const input = templateInput(request);
      // Text of the client's own with number markers in it would be read as numbers: bounded.
      if (input.numbers.length > 0 && hasMarkers(JSON.stringify(request))) {
        return estimateChatPrompt(request);
      }
      // vLLM parses each call's arguments; llama.cpp hands a template that prints a string
      // argument as is (Qwen 3's) the string as sent, its spacing and escapes too.
      const inputs = [input];
      if (printsStringArguments() && hasToolCalls(request))
        inputs.push(templateInput(request, false));
      let best = -1;
      for (const form of inputs) {
        const lookalikes = maskLookalikes(form, vocab);
        for (const variant of contentVariants(form)) {
          try {
            best = Math.max(best, countRendered(renderInput(variant, true), lookalikes));
          } catch {
            // The template refused this variant (raise_exception, or null where it wants text).
          }
        }
      }
      if (best < 0) return estimateChatPrompt(request);
      return best + outsideTokens(input, (text) => vocab.countPlain(text));
    },
  };
}

function hasToolCalls(request: ChatPromptRequest): boolean {
  return request.messages.some((m) => (m.tool_calls?.length ?? 0) > 0 || m.function_call != null);
}

/** The input as is and, if it has tool-call messages without text, with their content null. */
function contentVariants(input: TemplateInput): TemplateInput[] {
  if (input.nullableContent.length === 0) return [input];
  const nulled = input.messages.map((message, i) =>
    input.nullableContent.includes(i) ? { ...message, content: null } : message,
  );
  return [input, { ...input, messages: nulled }];
}

/** The special-token variables Hugging Face passes to a template (`bos_token`, `eos_token`...). */
function specialTokenVariables(vocab: Vocab): Record<string, string> {
  const out: Record<string, string> = {};
  const config = vocab.config as unknown as Record<string, unknown>;
  for (const key of ['bos_token', 'eos_token', 'unk_token', 'pad_token']) {
    const value = config[key];
    if (typeof value === 'string') out[key] = value;
    else if (typeof value === 'object' && value !== null && 'content' in value) {
      out[key] = String(value.content);
    }
  }
  return out;
}

/**
 * Replaces special-token text in every string of the template input with a marker, in place,
 * and returns the texts replaced (marker N stands for entry N).
 */
function maskLookalikes(input: TemplateInput, vocab: Vocab): string[] {
  const found: string[] = [];
  const mask = (value: unknown): unknown => {
    if (typeof value === 'string') {
      const pieces = vocab.splitSpecials(value);
      if (!pieces.some((p) => vocab.isSpecial(p))) return value;
      return pieces
        .map((p) => (vocab.isSpecial(p) ? `\uFDD0${found.push(p) - 1}\uFDD1` : p))
        .join('');
    }
    if (Array.isArray(value)) return value.map(mask);
    if (typeof value === 'object' && value !== null) {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [mask(k), mask(v)]));
    }
    return value;
  };
  input.messages = input.messages.map((m) => mask(m) as Record<string, unknown>);
  if (input.tools) input.tools = input.tools.map((t) => mask(t) as Record<string, unknown>);
  return found;
}
