import type { Usage } from '@holdfast/events';

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
}

interface ChunkChoice {
  index?: number;
  delta?: {
    role?: string;
    content?: string | null;
    refusal?: string | null;
    reasoning_content?: string | null;
    tool_calls?: ToolCallDelta[] | null;
    function_call?: { name?: string; arguments?: string } | null;
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

export interface ProviderUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
}

/** Usage figures the authority accepts: non-negative integers within its limits. */
function isCount(n: unknown): n is number {
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 0 && n <= 4_000_000;
}

interface ChoiceState {
  /** Output text of this choice not counted yet. */
  pending: string[];
  role: string;
  content: string[];
  refusal: string[];
  toolCalls: Map<number, { id: string; type: string; name: string; args: string[] }>;
  functionCall: { name: string; args: string[] } | undefined;
  logprobs: { content: unknown[]; refusal: unknown[] } | undefined;
  finishReason: string | null;
}

/**
 * Reads an upstream chat stream chunk by chunk: counts output tokens as they pass (every text
 * a delta carries), keeps the provider's usage when it arrives, and, for a non-streaming
 * client, assembles the `chat.completion` object OpenAI would have returned.
 */
export class ChatAccumulator {
  #counted = 0;
  /** Bytes of output text not counted yet: counting waits until it could matter (overLimit). */
  #pendingBytes = 0;
  /** The provider's usage, when its final chunk arrived. */
  providerUsage: ProviderUsage | undefined;
  readonly #choices = new Map<number, ChoiceState>();
  #meta: Pick<ChatChunk, 'id' | 'created' | 'model' | 'system_fingerprint' | 'service_tier'> = {};

  constructor(
    private readonly countText: (text: string) => number,
    private readonly assemble: boolean,
  ) {}

  add(chunk: ChatChunk): void {
    if (this.#meta.id === undefined && chunk.id !== undefined) {
      this.#meta = {
        id: chunk.id,
        created: chunk.created,
        model: chunk.model,
        system_fingerprint: chunk.system_fingerprint,
        service_tier: chunk.service_tier,
      };
    }
    if (chunk.usage) this.providerUsage = chunk.usage;
    for (const c of chunk.choices ?? []) this.#choice(c);
  }

  #choice(c: ChunkChoice): void {
    const index = typeof c.index === 'number' ? c.index : 0;
    let s = this.#choices.get(index);
    if (!s) {
      s = {
        pending: [],
        role: 'assistant',
        content: [],
        refusal: [],
        toolCalls: new Map(),
        functionCall: undefined,
        logprobs: undefined,
        finishReason: null,
      };
      this.#choices.set(index, s);
    }
    const d = c.delta ?? {};
    if (typeof d.role === 'string') s.role = d.role;
    this.#text(s, d.content, s.content);
    this.#text(s, d.refusal, s.refusal);
    this.#text(s, d.reasoning_content, undefined);
    for (const t of d.tool_calls ?? []) {
      const i = typeof t.index === 'number' ? t.index : 0;
      let call = s.toolCalls.get(i);
      if (!call) s.toolCalls.set(i, (call = { id: '', type: 'function', name: '', args: [] }));
      if (t.id) call.id = t.id;
      if (t.type) call.type = t.type;
      if (typeof t.function?.name === 'string') {
        call.name += t.function.name;
        this.#text(s, t.function.name, undefined);
      }
      this.#text(s, t.function?.arguments, call.args);
    }
    if (d.function_call) {
      s.functionCall ??= { name: '', args: [] };
      if (typeof d.function_call.name === 'string') {
        s.functionCall.name += d.function_call.name;
        this.#text(s, d.function_call.name, undefined);
      }
      this.#text(s, d.function_call.arguments, s.functionCall.args);
    }
    if (this.assemble && c.logprobs) {
      s.logprobs ??= { content: [], refusal: [] };
      s.logprobs.content.push(...(c.logprobs.content ?? []));
      s.logprobs.refusal.push(...(c.logprobs.refusal ?? []));
    }
    if (typeof c.finish_reason === 'string') s.finishReason = c.finish_reason;
  }

  #text(s: ChoiceState, text: unknown, into: string[] | undefined): void {
    if (typeof text !== 'string' || text.length === 0) return;
    s.pending.push(text);
    this.#pendingBytes += Buffer.byteLength(text);
    if (this.assemble) into?.push(text);
  }

  /** Output tokens so far (all choices): what was counted plus the pending text, counted now. */
  get counted(): number {
    if (this.#pendingBytes > 0) {
      // Each choice's deltas are one text: count them joined, as the provider does.
      for (const s of this.#choices.values()) {
        if (s.pending.length > 0) this.#counted += this.countText(s.pending.join(''));
        s.pending = [];
      }
      this.#pendingBytes = 0;
    }
    return this.#counted;
  }

  /**
   * Whether the output has passed `limit` tokens. A token covers at least one UTF-8 byte, so
   * text is only counted once the bytes not yet counted could reach the limit: a long reply is
   * counted in a few batches instead of once per chunk.
   */
  overLimit(limit: number): boolean {
    if (this.#counted + this.#pendingBytes <= limit) return false;
    return this.counted > limit;
  }

  /** Choices that have not finished yet (for an early end: they get finish_reason `length`). */
  unfinished(): number[] {
    return [...this.#choices].filter(([, s]) => s.finishReason === null).map(([i]) => i);
  }

  /** The usage to settle: the provider's when it reported one, else the edge's own count. */
  usage(promptTokens: number): Usage {
    const u = this.providerUsage;
    const prompt = u?.prompt_tokens;
    const completion = u?.completion_tokens;
    if (isCount(prompt) && isCount(completion)) {
      const cached = u?.prompt_tokens_details?.cached_tokens;
      return {
        promptTokens: prompt,
        completionTokens: completion,
        cachedPromptTokens: isCount(cached) ? Math.min(cached, prompt) : 0,
      };
    }
    return { promptTokens, completionTokens: this.counted, cachedPromptTokens: 0 };
  }

  /**
   * The assembled `chat.completion` (non-streaming clients). `finish` is the finish_reason of
   * choices the stream never finished; `usage` is the provider's, else the edge's count.
   */
  completion(fallbackModel: string, promptTokens: number, finish: string | null = null) {
    const choices = [...this.#choices.entries()]
      .sort(([a], [b]) => a - b)
      .map(([index, s]) => {
        const message: Record<string, unknown> = {
          role: s.role,
          content: s.content.length > 0 || s.toolCalls.size === 0 ? s.content.join('') : null,
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
        return {
          index,
          message,
          logprobs: s.logprobs ?? null,
          finish_reason: s.finishReason ?? finish,
        };
      });
    const u = this.usage(promptTokens);
    return {
      id: this.#meta.id ?? 'chatcmpl-holdfast',
      object: 'chat.completion',
      created: this.#meta.created ?? Math.floor(Date.now() / 1_000),
      model: this.#meta.model ?? fallbackModel,
      choices,
      usage: this.providerUsage ?? {
        prompt_tokens: u.promptTokens,
        completion_tokens: u.completionTokens,
        total_tokens: u.promptTokens + u.completionTokens,
      },
      ...(this.#meta.system_fingerprint !== undefined
        ? { system_fingerprint: this.#meta.system_fingerprint }
        : {}),
      ...(this.#meta.service_tier !== undefined ? { service_tier: this.#meta.service_tier } : {}),
    };
  }
}
