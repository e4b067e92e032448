import { ItemId, MAX_ITEM_IDS, type Usage } from '@holdfast/events';
import type { Accepted, StreamError, Transcript } from '../../call/adapter.js';
import { parseObject } from '../../call/pump.js';
import { reportedServiceTier } from '../../call/service-tier.js';
import { SEARCH_MODEL_USES, type ToolUses } from '../../call/tool-uses.js';
import { errorBody, type EdgeError } from '../../errors.js';
import { sseEvent, type SseEvent } from '../../upstream/sse.js';
import { openaiStreamErrorStatus } from '../stream-error.js';
import { plainUsage, usageCount } from '../usage.js';

/** The parts of a `chat.completion.chunk` the edge reads; the rest passes through untouched. */
export interface ChatChunk {
  id?: string;
  object?: string;
  created?: number;
  model?: string;
  system_fingerprint?: string | null;
  service_tier?: string | null;
  choices?: ChunkChoice[];
  usage?: ProviderUsage | null;
  /** An error the provider reports mid-stream (`data: {"error": {...}}`). */
  error?: { message?: unknown; type?: unknown; code?: unknown } | null;
}

interface ChunkChoice {
  index?: number;
  delta?: {
    role?: string;
    content?: string | null;
    refusal?: string | null;
    reasoning_content?: string | null;
    reasoning?: string | null;
    tool_calls?: ToolCallDelta[] | null;
    function_call?: { name?: string; arguments?: string } | null;
    /** Audio output (`modalities: ["audio"]`): base64 `data` and its `transcript`, in pieces. */
    audio?: { id?: string; data?: string; transcript?: string; expires_at?: number } | null;
  };
  logprobs?: { content?: unknown[] | null; refusal?: unknown[] | null } | null;
  finish_reason?: string | null;
}

interface ToolCallDelta {
  index?: number;
  id?: string;
  type?: string;
  function?: { name?: string; arguments?: string };
}

/** A provider usage whose prompt and completion counts are counts (usageCount). */
function reported(
  u: ProviderUsage | null | undefined,
): u is ProviderUsage & { prompt_tokens: number; completion_tokens: number } {
  return (
    usageCount(u?.prompt_tokens) !== undefined && usageCount(u?.completion_tokens) !== undefined
  );
}

export interface ProviderUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number; audio_tokens?: number } | null;
  completion_tokens_details?: { reasoning_tokens?: number; audio_tokens?: number } | null;
}

interface ChoiceState {
  role: string;
  content: string[];
  refusal: string[];
  toolCalls: Map<number, { id: string; type: string; name: string; args: string[] }>;
  functionCall: { name: string; args: string[] } | undefined;
  audio: { id: string; data: string[]; transcript: string[]; expiresAt: number | null } | undefined;
  logprobs: { content: unknown[]; refusal: unknown[] } | undefined;
  finishReason: string | null;
}

/**
 * Reads an upstream Chat Completions stream chunk by chunk: hands the output text of every
 * delta (content, refusal, reasoning, tool calls) to the pipeline's meter, keeps the
 * provider's usage when it arrives, and, for a non-streaming client, assembles the
 * `chat.completion` object OpenAI would have returned.
 */
export class ChatTranscript implements Transcript {
  /** The provider's usage, when its final chunk arrived. */
  providerUsage: ProviderUsage | undefined;
  readonly #choices = new Map<number, ChoiceState>();
  #meta: Pick<ChatChunk, 'id' | 'created' | 'model' | 'system_fingerprint' | 'service_tier'> = {};
  /** The service tier the last chunk that named one said (unchecked: serviceTier checks). */
  #tier: unknown;
  /** The message of the first error chunk the provider sent, if it sent one. */
  #error: StreamError | undefined;
  /** A chunk with choices came after the last usage (that usage was not the stream's end). */
  #afterUsage = false;

  constructor(
    private readonly opts: {
      /** Assemble the completion (a non-streaming client). */
      assemble: boolean;
      /** The client asked for the usage chunk (`stream_options.include_usage`). */
      wantsUsage: boolean;
      /** The model name the client sent (the id of the assembled completion). */
      model: string;
      /** A search model (config `searchModel`): the provider bills a search on every call. */
      searchModel?: boolean;
    },
  ) {}

  accept(event: SseEvent): Accepted | undefined {
    const chunk = parseObject(event.data) as ChatChunk | undefined;
    if (!chunk) return undefined;
    const texts = this.add(chunk);
    const usageOnly = chunk.usage && (chunk.choices ?? []).length === 0;
    return { texts, forward: usageOnly && !this.opts.wantsUsage ? null : sseEvent(event.data) };
  }

  /** Reads one chunk; returns the output text it carries, by choice. */
  add(chunk: ChatChunk): Accepted['texts'] {
    if (this.#meta.id === undefined && chunk.id !== undefined) {
      this.#meta = {
        id: chunk.id,
        created: chunk.created,
        model: chunk.model,
        system_fingerprint: chunk.system_fingerprint,
        service_tier: chunk.service_tier,
      };
    }
    // A later usage replaces the one kept (a provider reporting as it goes, vLLM's
    // continuous_usage_stats, counts up to its last), unless it is no usage at all: one whose
    // counts are missing or not counts does not wipe out the provider's word.
    if (chunk.usage && (reported(chunk.usage) || !reported(this.providerUsage))) {
      this.providerUsage = chunk.usage;
    }
    if (chunk.usage) this.#afterUsage = false;
    else if (this.providerUsage && (chunk.choices?.length ?? 0) > 0) this.#afterUsage = true;
    if (chunk.service_tier != null) this.#tier = chunk.service_tier;
    if (typeof chunk.error === 'object' && chunk.error !== null && this.#error === undefined) {
      const { message, type, code } = chunk.error;
      this.#error = {
        // A chat error chunk carries no status: its type and code say which (else 502).
        status: openaiStreamErrorStatus(type, code, 502),
        message: typeof message === 'string' ? message.slice(0, 500) : 'an error',
        beforeStart: false,
      };
    }
    const texts: Accepted['texts'] = [];
    if (chunk.choices != null) for (const c of chunk.choices) this.#choice(c, texts);
    return texts;
  }

  #choice(c: ChunkChoice, texts: Accepted['texts']): void {
    const index = typeof c.index === 'number' ? c.index : 0;
    let s = this.#choices.get(index);
    if (!s) {
      s = {
        role: 'assistant',
        content: [],
        refusal: [],
        toolCalls: new Map(),
        functionCall: undefined,
        audio: undefined,
        logprobs: undefined,
        finishReason: null,
      };
      this.#choices.set(index, s);
    }
    const d = c.delta;
    if (d) {
      if (typeof d.role === 'string') s.role = d.role;
      this.#text(index, texts, d.content, s.content);
      this.#text(index, texts, d.refusal, s.refusal);
      this.#text(index, texts, d.reasoning_content, undefined);
      this.#text(index, texts, d.reasoning, undefined);
      if (d.tool_calls != null) this.#toolCalls(index, texts, s, d.tool_calls);
      if (d.function_call) {
        s.functionCall ??= { name: '', args: [] };
        if (typeof d.function_call.name === 'string') {
          s.functionCall.name += d.function_call.name;
          this.#text(index, texts, d.function_call.name, undefined);
        }
        this.#text(index, texts, d.function_call.arguments, s.functionCall.args);
      }
      if (d.audio) {
        s.audio ??= { id: '', data: [], transcript: [], expiresAt: null };
        if (typeof d.audio.id === 'string') s.audio.id = d.audio.id;
        if (typeof d.audio.expires_at === 'number') s.audio.expiresAt = d.audio.expires_at;
        // The transcript is text the model wrote (counted); the audio bytes are not text.
        this.#text(index, texts, d.audio.transcript, s.audio.transcript);
        if (this.opts.assemble && typeof d.audio.data === 'string') s.audio.data.push(d.audio.data);
      }
    }
    if (this.opts.assemble && c.logprobs) {
      s.logprobs ??= { content: [], refusal: [] };
      s.logprobs.content.push(...(c.logprobs.content ?? []));
      s.logprobs.refusal.push(...(c.logprobs.refusal ?? []));
    }
    if (typeof c.finish_reason === 'string') s.finishReason = c.finish_reason;
  }

  #toolCalls(
    index: number,
    texts: Accepted['texts'],
    s: ChoiceState,
    calls: readonly ToolCallDelta[],
  ): void {
    for (const t of calls) {
      const i = typeof t.index === 'number' ? t.index : 0;
      let call = s.toolCalls.get(i);
      if (!call) s.toolCalls.set(i, (call = { id: '', type: 'function', name: '', args: [] }));
      if (t.id) call.id = t.id;
      if (t.type) call.type = t.type;
      if (typeof t.function?.name === 'string') {
        call.name += t.function.name;
        this.#text(index, texts, t.function.name, undefined);
      }
      this.#text(index, texts, t.function?.arguments, call.args);
    }
  }

  /** A text the model wrote: counted (`texts`), and kept for the assembled reply (`into`). */
  #text(index: number, texts: Accepted['texts'], t: unknown, into: string[] | undefined): void {
    if (typeof t !== 'string' || t.length === 0) return;
    texts.push({ choice: index, text: t });
    if (this.opts.assemble) into?.push(t);
  }

  /**
   * The usage chunk was the last the provider sent with choices after it: a stream that ends
   * there ended where providers end one. One that reported its usage early (as it goes) and
   * then stopped mid-reply did not.
   */
  usageLast(): boolean {
    return !this.#afterUsage;
  }

  /**
   * The audio replies the upstream made (`audio.id` of each choice): the provider keeps them for
   * whoever names one (any team: the same upstream account), so they are recorded as the
   * tenant's with the call's settle, as a stored Responses item is (chat adapter `audioIds`).
   */
  storedItemIds(): string[] {
    const ids = [...this.#choices.values()].flatMap((s) => (s.audio ? [s.audio.id] : []));
    return ids.filter((id) => ItemId.safeParse(id).success).slice(0, MAX_ITEM_IDS);
  }

  /** The provider's error chunk's message, when it sent one. */
  streamError(): StreamError | undefined {
    return this.#error;
  }

  /** Choices that have not finished yet (for an early end: they get finish_reason `length`). */
  unfinished(): number[] {
    return [...this.#choices].filter(([, s]) => s.finishReason === null).map(([i]) => i);
  }

  finished(): boolean {
    return this.#choices.size > 0 && this.unfinished().length === 0;
  }

  /**
   * A search model's one web search: the provider bills it on every call it answers, and its
   * usage does not report it (no chunk says so).
   */
  toolUses(): ToolUses | undefined {
    return this.opts.searchModel === true ? { ...SEARCH_MODEL_USES } : undefined;
  }

  /** The tier the chunks say served the call (each chunk names it; the last one wins). */
  serviceTier(): string | undefined {
    return reportedServiceTier(this.#tier);
  }

  /**
   * The provider's usage when it reported a well-formed one. Its parts (cached, reasoning,
   * audio) are kept within their totals: an odd count never bills less or goes negative.
   */
  usage(): Usage | undefined {
    const u = this.providerUsage;
    if (!reported(u)) return undefined;
    const [prompt, completion] = [u.prompt_tokens, u.completion_tokens];
    const part = (n: unknown, total: number) => Math.min(usageCount(n) ?? 0, total);
    const input = u?.prompt_tokens_details;
    const output = u?.completion_tokens_details;
    return {
      ...plainUsage(prompt, completion),
      cachedPromptTokens: part(input?.cached_tokens, prompt),
      reasoningTokens: part(output?.reasoning_tokens, completion),
      audioPromptTokens: part(input?.audio_tokens, prompt),
      audioCompletionTokens: part(output?.audio_tokens, completion),
    };
  }

  /** Ends a stream the edge cut the way a provider would: finish_reason length. */
  endAtLength(usage: Usage): string {
    const base = { id: this.#meta.id ?? 'chatcmpl-holdfast', object: 'chat.completion.chunk' };
    const chunk = { ...base, model: this.#meta.model ?? this.opts.model };
    let out = '';
    for (const index of this.unfinished()) {
      const c = { ...chunk, choices: [{ index, delta: {}, finish_reason: 'length' }] };
      out += sseEvent(JSON.stringify(c));
    }
    if (this.opts.wantsUsage) {
      const u = {
        prompt_tokens: usage.promptTokens,
        completion_tokens: usage.completionTokens,
        total_tokens: usage.promptTokens + usage.completionTokens,
      };
      out += sseEvent(JSON.stringify({ ...chunk, choices: [], usage: u }));
    }
    return out;
  }

  errorEvent(err: EdgeError, requestId: string): string {
    return sseEvent(JSON.stringify(errorBody(err, requestId)));
  }

  doneEvent(): string {
    return sseEvent('[DONE]');
  }

  /**
   * The assembled `chat.completion` (non-streaming clients). Choices the stream never
   * finished get finish_reason `length` when the edge cut the call; `usage` is what was
   * settled (the provider's when it reported one).
   */
  assemble(cut: boolean, usage: Usage) {
    const finish = cut ? 'length' : null;
    const choices = [...this.#choices.entries()]
      .sort(([a], [b]) => a - b)
      .map(([index, s]) => {
        const message: Record<string, unknown> = {
          role: s.role,
          content:
            s.content.length > 0 || (s.toolCalls.size === 0 && !s.audio)
              ? s.content.join('')
              : null,
          refusal: s.refusal.length > 0 ? s.refusal.join('') : null,
        };
        if (s.toolCalls.size > 0) {
          message.tool_calls = [...s.toolCalls.entries()]
            .sort(([a], [b]) => a - b)
            .map(([, t]) => ({
              id: t.id,
              type: t.type,
              function: { name: t.name, arguments: t.args.join('') },
            }));
        }
        if (s.functionCall) {
          message.function_call = {
            name: s.functionCall.name,
            arguments: s.functionCall.args.join(''),
          };
        }
        if (s.audio) {
          message.audio = {
            id: s.audio.id,
            data: s.audio.data.join(''),
            expires_at: s.audio.expiresAt,
            transcript: s.audio.transcript.join(''),
          };
        }
        return {
          index,
          message,
          logprobs: s.logprobs ?? null,
          finish_reason: s.finishReason ?? finish,
        };
      });
    return {
      id: this.#meta.id ?? 'chatcmpl-holdfast',
      object: 'chat.completion',
      created: this.#meta.created ?? Math.floor(Date.now() / 1_000),
      model: this.#meta.model ?? this.opts.model,
      choices,
      // The provider's usage as it wrote it when it reported one, else what was settled.
      usage: reported(this.providerUsage)
        ? this.providerUsage
        : {
            prompt_tokens: usage.promptTokens,
            completion_tokens: usage.completionTokens,
            total_tokens: usage.promptTokens + usage.completionTokens,
          },
      ...(this.#meta.system_fingerprint !== undefined
        ? { system_fingerprint: this.#meta.system_fingerprint }
        : {}),
      ...(this.#meta.service_tier !== undefined ? { service_tier: this.#meta.service_tier } : {}),
    };
  }
}
