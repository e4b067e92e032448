import { toolUseKind } from '@holdfast/config';
import { FILE_ID, ItemId, MAX_ITEM_IDS, ResponseId, type Usage } from '@holdfast/events';
import type { Accepted, StreamError, Transcript } from '../../call/adapter.js';
import { parseObject } from '../../call/pump.js';
import { reportedServiceTier } from '../../call/service-tier.js';
import { errorBody, type EdgeError } from '../../errors.js';
import { sseEvent, type SseEvent } from '../../upstream/sse.js';
import type { ToolUses } from '../../call/tool-uses.js';
import { openaiStreamErrorStatus } from '../stream-error.js';
import { plainUsage, usageCount } from '../usage.js';
import { itemText, OutputItems, type Item } from './items.js';
import { sealedId } from './sealed.js';

/** The `usage` of a Responses `response` object. */
interface ProviderUsage {
  input_tokens?: unknown;
  output_tokens?: unknown;
  input_tokens_details?: { cached_tokens?: unknown } | null;
  output_tokens_details?: { reasoning_tokens?: unknown } | null;
}

type ResponseObject = Record<string, unknown> & { id?: string; usage?: ProviderUsage | null };

/**
 * The kind an output item's use is billed as: a `*_call` item of a tool billed per use
 * (`web_search_call`, `file_search_call`, `code_interpreter_call`), by the kinds the request's
 * tools were held as (toolUseKind: one place says which tool is which kind).
 */
const callKind = (type: string) =>
  type.endsWith('_call') ? toolUseKind('openai', type.slice(0, -'_call'.length)) : undefined;
const str = (v: unknown) => (typeof v === 'string' ? v : '');

const TERMINAL = new Set(['response.completed', 'response.incomplete', 'response.failed']);
/** `*.delta` events that carry no text the model wrote (audio bytes). */
const NOT_TEXT = new Set(['response.audio.delta']);

/**
 * Reads an upstream Responses stream event by event: every text delta the model writes
 * (output text, refusals, reasoning text and summaries, function and tool call arguments) goes
 * to the pipeline's meter; an item that arrives whole (`output_item.done` without deltas, a
 * plain JSON answer) is counted from its content. The provider's usage comes with the terminal
 * event (`response.completed`, `.incomplete`, `.failed`). A stream the edge cuts ends with
 * `response.incomplete` (reason `max_output_tokens`), as OpenAI ends one at the limit.
 */
export class ResponsesTranscript implements Transcript {
  #response: ResponseObject | undefined;
  #final: ResponseObject | undefined;
  readonly #items = new OutputItems();
  /** storedResponseId's answer, found when a response object arrives. */
  #stored: string | undefined;
  /** storedItemIds's answer: the output items' ids, as they arrive. */
  readonly #storedItems = new Set<string>();
  /** The sealed contents already kept (an item comes with `.done` and the terminal output). */
  readonly #sealed = new Set<string>();
  /** Output indexes whose text arrived in deltas (counted as it came). */
  readonly #streamed = new Set<number>();
  #sequence = -1;
  /** The `error` event or `response.failed` the provider sent instead of an answer. */
  #error: StreamError | undefined;

  /** `store` false: the request said `store: false`, so the upstream keeps no response. */
  constructor(private readonly opts: { model: string; store?: boolean }) {}

  accept(event: SseEvent): Accepted | undefined {
    const data = parseObject(event.data);
    const type = typeof data?.type === 'string' ? data.type : event.event;
    if (!data || type === undefined) return undefined;
    if (typeof data.sequence_number === 'number')
      this.#sequence = Math.max(this.#sequence, data.sequence_number);
    const texts: Accepted['texts'] = [];
    let begins = false;
    const index = typeof data.output_index === 'number' ? data.output_index : 0;
    if (type.endsWith('.delta') && !NOT_TEXT.has(type) && typeof data.delta === 'string') {
      this.#streamed.add(index);
      this.#items.delta(type, data);
      texts.push({ choice: 0, text: data.delta });
    } else if (type === 'response.output_item.added' || type === 'response.output_item.done') {
      const item = data.item as Item | undefined;
      if (item) {
        // A provider-run tool's call (web_search_call, ...): the provider works, and bills.
        begins = str(item.type).endsWith('_call');
        this.#storedItem(item);
        const first = this.#items.put(index, item);
        // A function's name is written by the model too (counted once, as on chat).
        if (first && typeof item.name === 'string') texts.push({ choice: 0, text: item.name });
        if (type === 'response.output_item.done' && !this.#streamed.has(index)) {
          this.#streamed.add(index);
          const text = itemText(item);
          if (text) texts.push({ choice: 0, text });
        }
      }
    } else if (type === 'response.output_text.annotation.added') {
      // A file the code wrote, cited as it streams (before its item is done: a cut stream too).
      this.#citedFile(data.annotation);
    } else if (TERMINAL.has(type)) {
      // One terminal event ends a response; a later one (a broken upstream) replaces it only
      // when it reported no usage, never wiping out a usage that came.
      const answered = this.finished();
      if (this.usage() === undefined) this.#final = data.response as ResponseObject;
      // A response that failed (and had not completed before): its error fails the call.
      if (type === 'response.failed' && !answered) {
        const failed = data.response as ResponseObject | undefined;
        const e = (failed?.error ?? {}) as { code?: unknown; message?: unknown };
        this.#failed(e.code, e.message);
      }
      this.#stored = this.#storedId();
      const output = (data.response as ResponseObject | undefined)?.output;
      if (Array.isArray(output)) for (const item of output as Item[]) this.#storedItem(item);
    } else if (type === 'error') {
      if (!this.finished()) this.#failed(data.code, data.message);
    } else if (type === 'response.created' || type === 'response.in_progress') {
      this.#response ??= data.response as ResponseObject;
      this.#stored = this.#storedId();
    }
    return { texts, forward: sseEvent(event.data, type), ...(begins ? { begins } : {}) };
  }

  /** The tier the response object says served the call (the terminal one's, else the first). */
  serviceTier(): string | undefined {
    return reportedServiceTier((this.#final ?? this.#response)?.service_tier);
  }

  /**
   * Uses of the tools billed per use: one per `web_search_call`, `file_search_call`,
   * `code_interpreter_call` output item, of the final response when it came, else of the items
   * the stream showed.
   */
  toolUses(): ToolUses | undefined {
    const output = this.#final?.output;
    const items = Array.isArray(output) ? (output as Item[]) : this.#items.list(false);
    const uses: ToolUses = {};
    for (const item of items) {
      const kind = callKind(str(item?.type));
      if (kind) uses[kind] = (uses[kind] ?? 0) + 1;
    }
    return Object.keys(uses).length > 0 ? uses : undefined;
  }

  usage(): Usage | undefined {
    const u = this.#final?.usage;
    const prompt = usageCount(u?.input_tokens);
    const completion = usageCount(u?.output_tokens);
    if (prompt === undefined || completion === undefined) return undefined;
    const cached = usageCount(u?.input_tokens_details?.cached_tokens) ?? 0;
    const reasoning = usageCount(u?.output_tokens_details?.reasoning_tokens) ?? 0;
    return {
      ...plainUsage(prompt, completion),
      cachedPromptTokens: Math.min(cached, prompt),
      reasoningTokens: Math.min(reasoning, completion),
    };
  }

  /**
   * The id the upstream stored the response under: the terminal event's, else
   * `response.created`'s (a stream that failed after it), when it is a response id at all.
   */
  storedResponseId(): string | undefined {
    return this.#stored;
  }

  /**
   * The ids of the output items the upstream stored with the response (`output_item.added` /
   * `.done`, the terminal response's output), none with `store: false` but its MCP approval
   * requests, and the containers its
   * code_interpreter calls ran in and the files its messages cite from them (with `store: false`
   * too: the provider keeps them), and the sealed content its items carry (a reasoning item's
   * `encrypted_content`, by its digest: sealed.ts; with `store: false` too): the first
   * MAX_ITEM_IDS, each an item id (ItemId). An item past them stays unowned: no call may read it
   * by id.
   */
  storedItemIds(): string[] {
    return [...this.#storedItems];
  }

  #storedItem(item: Item | null | undefined): void {
    // A code_interpreter call's container is kept by the provider whatever `store` says; an MCP
    // approval request is answered by id whatever it says (sent back with a store: false
    // conversation), so it is the team's either way.
    const always = item?.type === 'mcp_approval_request';
    const ids = [this.opts.store === false && !always ? undefined : item?.id, item?.container_id];
    for (const id of ids) this.#keep(id);
    // Sealed reasoning opens for any team of the upstream account, whatever `store` says.
    const sealed = item?.encrypted_content;
    if (typeof sealed === 'string' && !this.#sealed.has(sealed)) {
      this.#sealed.add(sealed);
      this.#keep(sealedId(sealed));
    }
    const content: unknown = item?.content;
    if (!Array.isArray(content)) return;
    for (const part of content as { annotations?: unknown }[]) {
      const annotations = part?.annotations;
      if (Array.isArray(annotations)) for (const a of annotations as unknown[]) this.#citedFile(a);
    }
  }

  /**
   * A file the code interpreter wrote in its container, as the message cites it
   * (`container_file_citation`, `cfile_...`): kept with the container whatever `store` says, and
   * named by id by a later call's `input_file` / `input_image`, so it is the tenant's
   * (the authority records it as a file: FILE_ID).
   */
  #citedFile(annotation: unknown): void {
    const a = annotation as { type?: unknown; file_id?: unknown } | null | undefined;
    if (a?.type === 'container_file_citation' && typeof a.file_id === 'string') {
      if (FILE_ID.test(a.file_id)) this.#keep(a.file_id);
    }
  }

  #keep(id: unknown): void {
    if (this.#storedItems.size >= MAX_ITEM_IDS) return;
    if (typeof id === 'string' && ItemId.safeParse(id).success) this.#storedItems.add(id);
  }

  #storedId(): string | undefined {
    if (this.opts.store === false) return undefined;
    const id = this.#final?.id ?? this.#response?.id;
    return ResponseId.safeParse(id).success ? id : undefined;
  }

  /** A response that completed or ended incomplete; one that failed did not finish. */
  finished(): boolean {
    return this.#final !== undefined && this.#error === undefined;
  }

  /**
   * The `error` event, or `response.failed`, the provider sent instead of the rest of the
   * answer, as the status its code stands for (a server error: 500).
   */
  streamError(): StreamError | undefined {
    return this.#error;
  }

  #failed(code: unknown, message: unknown): void {
    this.#error ??= {
      status: openaiStreamErrorStatus(undefined, code, 500),
      message: `${str(code) || 'error'}: ${str(message).slice(0, 200)}`,
      beforeStart: false,
    };
  }

  endAtLength(usage: Usage): string {
    const response = this.#snapshot('incomplete', usage);
    const data = { type: 'response.incomplete', sequence_number: ++this.#sequence, response };
    return sseEvent(JSON.stringify(data), 'response.incomplete');
  }

  errorEvent(err: EdgeError, requestId: string): string {
    const { message, code, param } = errorBody(err, requestId).error;
    const data = { type: 'error', sequence_number: ++this.#sequence, code, message, param };
    return sseEvent(JSON.stringify(data), 'error');
  }

  doneEvent(): string {
    return '';
  }

  /** The provider's final response; else the one the stream built (incomplete when cut). */
  assemble(cut: boolean, usage: Usage): unknown {
    if (this.#final && !cut) return this.#final;
    return this.#snapshot(cut ? 'incomplete' : 'completed', usage);
  }

  #snapshot(status: 'completed' | 'incomplete', usage: Usage): Record<string, unknown> {
    const base = this.#final ?? this.#response ?? {};
    return {
      id: 'resp_holdfast',
      object: 'response',
      created_at: Math.floor(Date.now() / 1_000),
      model: this.opts.model,
      ...base,
      status,
      incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
      output: this.#items.list(status === 'incomplete'),
      usage: {
        input_tokens: usage.promptTokens,
        input_tokens_details: { cached_tokens: usage.cachedPromptTokens },
        output_tokens: usage.completionTokens,
        output_tokens_details: { reasoning_tokens: usage.reasoningTokens },
        total_tokens: usage.promptTokens + usage.completionTokens,
      },
    };
  }
}
