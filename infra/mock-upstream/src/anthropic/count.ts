import { createHash, type Hash } from 'node:crypto';
import { Err, Ok, type Result } from '@holdfast/runtime';
import { imageSizeFromDataUrl, loadTokenizer } from '@holdfast/tokenizer';
import type { ToolPrompt } from '../behaviour.js';
import { FILE_INPUT_TOKENS } from '../prompt.js';
import type { PromptCount } from '../usage.js';
import type { PromptCache } from './cache.js';
import type { CacheControl, ContentBlock, CountTokensBody } from './schema.js';

/**
 * Input tokens of a Messages request, the one rule for `/v1/messages` and
 * `/v1/messages/count_tokens` (o200k text counts plus fixed framing; Claude's tokenizer is not
 * public, and what matters is that the count and the bill agree):
 * - tools: Anthropic's tool-use system prompt (the behaviour's `toolPromptTokens`: 346 tokens,
 *   313 when tool_choice is any/tool, its figures for Claude 4 models), plus the computer-use
 *   system prompt when a computer tool is offered; then each tool as its JSON (everything but
 *   cache_control), plus the hidden definition of a built-in client tool (BUILT_IN_TOOLS);
 * - system: its text;
 * - each message: 3 tokens of framing, then its content: text; images by Anthropic's formula
 *   (width x height / 750 after fitting 1568 px, 1,600 when the size is unknown); tool_use as its
 *   name and input JSON plus 3; tool_result as its content plus 3; thinking as its text; a
 *   document FILE_INPUT_TOKENS plus its JSON (its pages, which its bytes do not show); any
 *   other block as its JSON;
 * - 3 tokens for the reply primer, and a guessed citations prompt when citations are enabled.
 * Each tool, system block and content block is one "block" of the prompt, the unit that
 * `cache_control` marks and that prompt caching reads and writes.
 */
export interface Segment {
  tokens: number;
  /** What the block says (cache_control left out), for the cache key. */
  content: unknown;
  /** A cache breakpoint here, with its TTL. */
  breakpoint: '5m' | '1h' | null;
}

/**
 * Anthropic's built-in client tools: the request names them by type only
 * (`{type: 'bash_20250124', name: 'bash'}`) and Anthropic bills their definitions as input, its
 * documented figures (docs.anthropic.com, "Tool use pricing and tokens"): bash 245, text editor
 * 700, computer use 735. The memory tool's is undocumented: 900 is a guess (a text-editor-sized
 * definition plus the memory instructions it adds).
 */
const BUILT_IN_TOOLS: readonly { type: RegExp; tokens: number }[] = [
  { type: /^bash_/, tokens: 245 },
  { type: /^text_editor_/, tokens: 700 },
  { type: /^computer_/, tokens: 735 },
  { type: /^memory_/, tokens: 900 },
];
/** Computer use adds a system prompt of its own (466-499 tokens, by Anthropic's docs), once. */
const COMPUTER_USE_PROMPT = 499;
const MESSAGE_FRAMING = 3;
const REPLY_PRIMER = 3;
/**
 * Anthropic says enabling citations adds to the system prompt (and chunks documents); it
 * publishes no figure: 300 here is a guess, added once when any block (a document, a
 * search_result, in a message, the system or a tool result) has `citations.enabled`.
 */
const CITATIONS_PROMPT = 300;
const UNKNOWN_IMAGE = 1600;
const MAX_BREAKPOINTS = 4;

type Count = (text: string) => number;

/** Cache breakpoints Anthropic refuses (too many, or a 1h one after a 5m one). */
interface InvalidCache {
  code: 'invalid_cache_control';
  message: string;
}

export async function promptSegments(
  body: CountTokensBody,
  toolPrompt: ToolPrompt,
): Promise<Result<{ segments: Segment[]; total: number }, InvalidCache>> {
  const tokenizer = await loadTokenizer('o200k_base');
  const count: Count = (t) => tokenizer.countText(t);
  const segments: Segment[] = [];
  const add = (tokens: number, block: { cache_control?: CacheControl | null }, content: unknown) =>
    segments.push({ tokens, content, breakpoint: ttl(block.cache_control) });

  const tools = body.tools ?? [];
  const forced = body.tool_choice?.type === 'any' || body.tool_choice?.type === 'tool';
  const computer = tools.some((t) => typeof t.type === 'string' && t.type.startsWith('computer_'));
  const systemPrompts =
    toolPrompt[forced ? 'forced' : 'auto'] + (computer ? COMPUTER_USE_PROMPT : 0);
  for (const [i, tool] of tools.entries()) {
    const { cache_control: _, ...definition } = tool;
    const overhead = (i === 0 ? systemPrompts : 0) + builtInTokens(tool.type);
    add(overhead + count(JSON.stringify(definition)), tool, definition);
  }
  if (typeof body.system === 'string') add(count(body.system), {}, body.system);
  else for (const block of body.system ?? []) add(blockTokens(block, count), block, strip(block));
  for (const message of body.messages) {
    if (typeof message.content === 'string') {
      add(MESSAGE_FRAMING + count(message.content), {}, [message.role, message.content]);
      continue;
    }
    for (const [i, block] of message.content.entries()) {
      const framing = i === 0 ? MESSAGE_FRAMING : 0;
      add(framing + blockTokens(block, count), block, [message.role, strip(block)]);
    }
  }
  const cites = citations(body) ? CITATIONS_PROMPT : 0;
  segments.push({ tokens: REPLY_PRIMER + cites, content: null, breakpoint: null });

  const marks = segments.filter((s) => s.breakpoint);
  if (marks.length > MAX_BREAKPOINTS) {
    return Err({
      code: 'invalid_cache_control',
      message: `A maximum of ${MAX_BREAKPOINTS} blocks with cache_control may be provided. Found ${marks.length}.`,
    });
  }
  // Longer-lived entries must come first in the prompt, as Anthropic requires.
  const fiveMinute = marks.findIndex((s) => s.breakpoint === '5m');
  if (fiveMinute >= 0 && marks.slice(fiveMinute).some((s) => s.breakpoint === '1h')) {
    return Err({
      code: 'invalid_cache_control',
      message: "A cache_control ttl='1h' block must come before any ttl='5m' block.",
    });
  }
  return Ok({ segments, total: segments.reduce((n, s) => n + s.tokens, 0) });
}

/** Some block of the prompt (a tool result's blocks included) asks for citations. */
function citations(body: CountTokensBody): boolean {
  const cites = (b: unknown): boolean => {
    const block = b as { citations?: { enabled?: unknown }; content?: unknown };
    if (block.citations?.enabled === true) return true;
    return Array.isArray(block.content) && block.content.some(cites);
  };
  const system = Array.isArray(body.system) ? body.system : [];
  return [...system, ...body.messages].some(cites);
}

function builtInTokens(type: unknown): number {
  if (typeof type !== 'string') return 0;
  return BUILT_IN_TOOLS.find((b) => b.type.test(type))?.tokens ?? 0;
}

function ttl(control: CacheControl | null | undefined): '5m' | '1h' | null {
  return control ? (control.ttl ?? '5m') : null;
}

function strip(block: ContentBlock): unknown {
  const { cache_control: _, ...rest } = block;
  return rest;
}

const str = (value: unknown) => (typeof value === 'string' ? value : JSON.stringify(value ?? ''));

function blockTokens(block: ContentBlock, count: Count): number {
  const b = block as Record<string, unknown>;
  switch (block.type) {
    case 'text':
      return count(str(b.text));
    case 'image':
      return imageTokens(b.source);
    case 'tool_use':
      return count(str(b.name)) + count(JSON.stringify(b.input ?? {})) + 3;
    case 'tool_result': {
      const content: unknown = b.content;
      const inner = Array.isArray(content)
        ? (content as ContentBlock[]).reduce((n, c) => n + blockTokens(c, count), 0)
        : count(str(content ?? ''));
      return inner + 3;
    }
    case 'thinking':
      return count(str(b.thinking));
    case 'document':
      return FILE_INPUT_TOKENS + count(JSON.stringify(strip(block)));
    default:
      return count(JSON.stringify(strip(block)));
  }
}

/** Anthropic's image formula: (width x height) / 750, after fitting the long edge to 1568 px. */
function imageTokens(source: unknown): number {
  const s = source as { type?: unknown; media_type?: unknown; data?: unknown } | undefined;
  if (s?.type !== 'base64' || typeof s.data !== 'string') return UNKNOWN_IMAGE;
  const size = imageSizeFromDataUrl(`data:${str(s.media_type)};base64,${s.data}`);
  if (!size) return UNKNOWN_IMAGE;
  const scale = Math.min(1, 1568 / Math.max(size.width, size.height));
  return Math.ceil((size.width * scale * (size.height * scale)) / 750);
}

const TTL_MS = { '5m': 5 * 60_000, '1h': 60 * 60_000 } as const;
// Anthropic looks for an earlier hit up to 20 blocks before each breakpoint.
const LOOKBACK = 20;

/**
 * The prompt-cache outcome of a request: the longest cached prefix that ends at a block
 * boundary within 20 blocks before a breakpoint is read; every breakpoint after it whose prefix
 * has at least `minTokens` is written, the tokens since the previous read or write charged at
 * that breakpoint's TTL. `commit` applies it (once the call reaches the model).
 */
export function planCache(
  model: string,
  segments: readonly Segment[],
  cache: PromptCache,
  minTokens: number,
): { prompt: PromptCount; commit: () => void } {
  const keys: string[] = [];
  const prefix: number[] = [];
  const hash: Hash = createHash('sha256').update(model);
  let sum = 0;
  for (const s of segments) {
    hash.update(JSON.stringify(s.content)).update('\u0000');
    keys.push(hash.copy().digest('hex'));
    sum += s.tokens;
    prefix.push(sum);
  }
  const breakpoints = segments.flatMap((s, i) => (s.breakpoint ? [i] : []));
  let read = -1;
  for (const bp of [...breakpoints].reverse()) {
    for (let j = bp; j >= Math.max(0, bp - LOOKBACK + 1) && read < 0; j--) {
      if (cache.has(keys[j]!)) read = j;
    }
    if (read >= 0) break;
  }
  const prompt: PromptCount = {
    tokens: sum,
    cached: read >= 0 ? prefix[read]! : 0,
    cacheWrite5m: 0,
    cacheWrite1h: 0,
  };
  const writes: { key: string; ttl: '5m' | '1h' }[] = [];
  let cursor = prompt.cached;
  for (const bp of breakpoints) {
    if (bp <= read || prefix[bp]! < minTokens) continue;
    const ttlName = segments[bp]!.breakpoint!;
    if (ttlName === '1h') prompt.cacheWrite1h += prefix[bp]! - cursor;
    else prompt.cacheWrite5m += prefix[bp]! - cursor;
    cursor = prefix[bp]!;
    writes.push({ key: keys[bp]!, ttl: ttlName });
  }
  return {
    prompt,
    commit: () => {
      if (read >= 0) cache.touch(keys[read]!);
      for (const w of writes) cache.write(w.key, TTL_MS[w.ttl]);
    },
  };
}
