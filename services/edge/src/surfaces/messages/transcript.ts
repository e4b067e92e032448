import { toolUseKind } from '@holdfast/config';
import { FILE_ID, ItemId, MAX_ITEM_IDS, type Usage } from '@holdfast/events';
import type { Accepted, InputUsage, StreamError, Transcript } from '../../call/adapter.js';
import { parseObject } from '../../call/pump.js';
import { reportedServiceTier } from '../../call/service-tier.js';
import { anthropicErrorBody, type EdgeError } from '../../errors.js';
import { sseEvent, type SseEvent } from '../../upstream/sse.js';
import type { ToolUses } from '../../call/tool-uses.js';
import {
  anthropicInput,
  anthropicUsage,
  serverToolUses,
  toAnthropicUsage,
  type AnthropicUsage,
} from './usage.js';

interface BlockState {
  start: Record<string, unknown> & { type?: string; name?: unknown };
  text: string[];
  json: string[];
  thinking: string[];
  signature: string;
  stopped: boolean;
}

interface StopFields {
  stop_reason?: unknown;
  stop_sequence?: unknown;
  container?: unknown;
}

interface MessageMeta {
  id?: string;
  model?: string;
  usage?: AnthropicUsage;
  [field: string]: unknown;
}

const str = (v: unknown) => (typeof v === 'string' ? v : '');

/** Deltas that carry what the model writes: where a block keeps them, and their field. */
const DELTAS: Record<string, readonly ['text' | 'json' | 'thinking', string]> = {
  text_delta: ['text', 'text'],
  input_json_delta: ['json', 'partial_json'],
  thinking_delta: ['thinking', 'thinking'],
};

/** The HTTP status each of Anthropic's error types is answered with (its errors page). */
const ERROR_STATUS: Readonly<Record<string, number>> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  timeout_error: 504,
  overloaded_error: 529,
};

/**
 * Reads an upstream Messages stream event by event: every text the model writes (text,
 * thinking, tool input JSON, tool names) goes to the pipeline's meter; the input counts come
 * with message_start (billed even if the stream ends early), the output with message_delta,
 * and message_stop ends it. A stream the edge cuts is closed the way Anthropic closes one at
 * max_tokens: the open block stopped, message_delta with stop_reason max_tokens, message_stop.
 */
export class MessagesTranscript implements Transcript {
  #meta: MessageMeta = {};
  #usage: AnthropicUsage | undefined;
  #final = false;
  #started = false;
  #error: StreamError | undefined;
  #outputReported = false;
  #stopped = false;
  #stop: StopFields = {};
  #container: string | undefined;
  readonly #files = new Set<string>();
  readonly #blocks = new Map<number, BlockState>();

  constructor(private readonly opts: { model: string }) {}

  accept(event: SseEvent): Accepted | undefined {
    const data = parseObject(event.data);
    const type = typeof data?.type === 'string' ? data.type : event.event;
    if (!data || type === undefined) return undefined;
    const texts: Accepted['texts'] = [];
    const text = (t: unknown) => {
      if (typeof t === 'string' && t.length > 0) texts.push({ choice: 0, text: t });
    };
    const index = typeof data.index === 'number' ? data.index : 0;
    if (type === 'message_start') {
      this.#started = true;
      this.#meta = (data.message ?? {}) as MessageMeta;
      this.#containerOf(this.#meta);
      // A message_delta that came first (out of order) keeps its counts: they are cumulative.
      this.#usage = { ...this.#meta.usage, ...this.#usage };
    } else if (type === 'content_block_start') {
      const start = (data.content_block ?? {}) as BlockState['start'];
      this.#blocks.set(index, {
        start,
        text: [],
        json: [],
        thinking: [],
        signature: '',
        stopped: false,
      });
      text(start.name);
      text(start.text);
      this.#filesOf(start);
    } else if (type === 'content_block_delta') {
      const block = this.#blocks.get(index);
      const d = (data.delta ?? {}) as Record<string, unknown>;
      const into = DELTAS[str(d.type)];
      if (into) {
        const piece = str(d[into[1]]);
        block?.[into[0]].push(piece);
        text(piece);
      } else if (d.type === 'signature_delta' && block) {
        block.signature += str(d.signature);
      }
    } else if (type === 'content_block_stop') {
      const block = this.#blocks.get(index);
      if (block) block.stopped = true;
    } else if (type === 'message_delta') {
      // Its usage is cumulative, and may repeat the input counts; a count it leaves null
      // (the API types them nullable) keeps message_start's, never wipes it out.
      this.#usage = withCounts(this.#usage, data.usage as AnthropicUsage | undefined);
      // The output is the reply's only when a message_delta counts it (message_start's is a
      // placeholder, 1): a delta that leaves it out or null leaves the output unreported.
      const output = (data.usage as AnthropicUsage | null | undefined)?.output_tokens;
      this.#outputReported ||= output !== null && output !== undefined;
      this.#stop = data.delta ?? {};
      this.#containerOf(this.#stop);
      this.#final = true;
    } else if (type === 'message_stop') {
      this.#stopped = true;
    } else if (type === 'error') {
      const error = (data.error ?? {}) as { type?: unknown; message?: unknown };
      this.#error ??= {
        status: ERROR_STATUS[str(error.type)] ?? 500,
        message: `${str(error.type) || 'error'}: ${str(error.message).slice(0, 200)}`,
        beforeStart: !this.#started,
      };
    }
    return { texts, forward: sseEvent(event.data, type) };
  }

  /**
   * The code execution container the call ran in (message_start's or message_delta's
   * `container`): the provider keeps its files for whoever names it, so it is recorded as the
   * tenant's with the settle, and only the tenant may reuse it.
   */
  storedItemIds(): string[] {
    return [...(this.#container ? [this.#container] : []), ...this.#files];
  }

  /**
   * The files a code execution result reports its code wrote (`bash_code_execution_output` /
   * `code_execution_output` with a `file_id`): the provider keeps them in its Files API for
   * whoever names them, so they are the tenant's as its container is (the first MAX_ITEM_IDS
   * less the container's place; a file past them stays unrecorded).
   */
  #filesOf(block: { type?: unknown; content?: unknown }): void {
    if (typeof block.type !== 'string' || !block.type.endsWith('code_execution_tool_result')) {
      return;
    }
    const result = block.content as { content?: unknown } | null | undefined;
    const outputs = Array.isArray(result?.content) ? (result.content as unknown[]) : [];
    for (const output of outputs) {
      const id = (output as { file_id?: unknown } | null)?.file_id;
      if (this.#files.size >= MAX_ITEM_IDS - 1) return;
      if (typeof id === 'string' && FILE_ID.test(id) && ItemId.safeParse(id).success) {
        this.#files.add(id);
      }
    }
  }

  #containerOf(from: object): void {
    const container = (from as { container?: { id?: unknown } | null }).container;
    const id = container?.id;
    if (typeof id === 'string' && ItemId.safeParse(id).success) this.#container = id;
  }

  /** The `error` event Anthropic sent instead of the rest of the stream (overloaded, ...). */
  streamError(): StreamError | undefined {
    return this.#error;
  }

  /** The tier Anthropic's usage says served the call (message_start's, or message_delta's). */
  serviceTier(): string | undefined {
    return reportedServiceTier(this.#usage?.service_tier);
  }

  /**
   * Server tool uses (web search, web fetch): `usage.server_tool_use`'s counts when Anthropic
   * reported them in its final usage (message_delta), else a `server_tool_use` block per use
   * the stream showed, or the counts of an earlier usage (message_start) where they are more.
   */
  toolUses(): ToolUses | undefined {
    const reported = serverToolUses(this.#usage);
    if (this.#final && reported) return reported;
    const seen: ToolUses = { ...reported };
    const blocks: ToolUses = {};
    for (const block of this.#blocks.values()) {
      const kind =
        block.start.type === 'server_tool_use'
          ? toolUseKind('anthropic', str(block.start.name))
          : undefined;
      if (kind) blocks[kind] = (blocks[kind] ?? 0) + 1;
    }
    for (const [kind, n] of Object.entries(blocks) as [keyof ToolUses, number][]) {
      seen[kind] = Math.max(seen[kind] ?? 0, n);
    }
    return Object.keys(seen).length > 0 ? seen : undefined;
  }

  usage(): Usage | undefined {
    return this.#outputReported ? anthropicUsage(this.#usage) : undefined;
  }

  inputUsage(): InputUsage | undefined {
    return anthropicInput(this.#usage);
  }

  /**
   * message_stop, or a message_delta with its stop_reason: Anthropic sends nothing after that
   * delta but message_stop, so a connection lost before it lost nothing of the message.
   */
  finished(): boolean {
    return this.#stopped || (this.#final && this.#stop.stop_reason != null);
  }

  endAtLength(usage: Usage): string {
    let out = '';
    for (const [index, block] of this.#blocks) {
      if (!block.stopped)
        out += sseEvent(
          JSON.stringify({ type: 'content_block_stop', index }),
          'content_block_stop',
        );
    }
    const delta = {
      type: 'message_delta',
      delta: { stop_reason: 'max_tokens', stop_sequence: null },
      usage: { output_tokens: usage.completionTokens },
    };
    out += sseEvent(JSON.stringify(delta), 'message_delta');
    this.#stopped = true;
    return out + sseEvent(JSON.stringify({ type: 'message_stop' }), 'message_stop');
  }

  errorEvent(err: EdgeError, requestId: string): string {
    const { type, error } = anthropicErrorBody(err, requestId);
    return sseEvent(JSON.stringify({ type, error }), 'error');
  }

  /** message_stop, when the stream finished without it (its connection lost after message_delta). */
  doneEvent(): string {
    return this.#stopped ? '' : sseEvent(JSON.stringify({ type: 'message_stop' }), 'message_stop');
  }

  /** The `message` Anthropic would have returned (stop_reason max_tokens when the edge cut it). */
  assemble(cut: boolean, usage: Usage): unknown {
    const content = [...this.#blocks.entries()].sort(([a], [b]) => a - b).map(([, b]) => block(b));
    const provider = this.#outputReported && !cut ? this.#usage : undefined;
    return {
      id: 'msg_holdfast',
      type: 'message',
      role: 'assistant',
      model: this.opts.model,
      ...this.#meta,
      content,
      stop_reason: cut ? 'max_tokens' : (this.#stop.stop_reason ?? null),
      stop_sequence: cut ? null : (this.#stop.stop_sequence ?? null),
      usage: provider ?? toAnthropicUsage(usage),
    };
  }
}

function block(b: BlockState): Record<string, unknown> {
  switch (b.start.type) {
    case 'text':
      return { ...b.start, text: str(b.start.text) + b.text.join('') };
    case 'thinking':
      return {
        ...b.start,
        thinking: str(b.start.thinking) + b.thinking.join(''),
        signature: b.signature || str(b.start.signature),
      };
    case 'tool_use':
    case 'server_tool_use': {
      const json = b.json.join('');
      return { ...b.start, input: json ? parseOr(json, b.start.input) : (b.start.input ?? {}) };
    }
    default:
      return b.start;
  }
}

/** The JSON a tool's input deltas add up to (the deltas as they came when it is cut short). */
function parseOr(json: string, fallback: unknown): unknown {
  try {
    return JSON.parse(json) as unknown;
  } catch {
    return fallback ?? {};
  }
}

/** `base` with every field of `next` that is not null or absent. */
function withCounts(
  base: AnthropicUsage | undefined,
  next: AnthropicUsage | undefined,
): AnthropicUsage | undefined {
  if (!next || typeof next !== 'object') return base;
  const merged: AnthropicUsage = { ...base };
  for (const [field, value] of Object.entries(next)) {
    if (value !== null && value !== undefined) merged[field] = value;
  }
  return merged;
}
