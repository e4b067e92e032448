import type { CompiledModel, UpstreamApi, UpstreamConfig } from '@holdfast/config';
import type { ApiSurface, Usage } from '@holdfast/events';
import type { Result } from '@holdfast/runtime';
import type { CountOwner, TokenizerName } from '@holdfast/tokenizer';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { EdgeError } from '../errors.js';
import type { SseEvent } from '../upstream/sse.js';
import type { CountFor } from '../upstream/counting.js';
import type { CallDeps } from './deps.js';
import type { OfferedTools, ToolUses } from './tool-uses.js';
import type { ForwardedHeader } from './context.js';

/** What the client asked for, read before anything is counted. */
export interface Asked {
  model: string;
  /** Its output ceiling (max_tokens, max_output_tokens, ...), null when absent. */
  maxOutput: number | null;
  /** Choices it asked for (`n`); the output ceiling is shared between them. */
  choices: number;
  stream: boolean;
  /** The end user the call is for (OpenAI `user`, Anthropic `metadata.user_id`), if any. */
  endUser: string | null;
  /** It sends audio (Chat Completions `input_audio` parts): its prompt held at that price. */
  audioInput?: boolean;
  /** It asks for audio output (Chat Completions `modalities`, `audio`): held at that price. */
  audioOutput?: boolean;
  /** Its `service_tier` as sent (checked and priced by heldServiceTier). */
  serviceTier?: unknown;
  /**
   * It asks the model to think first (`reasoning_effort`, Responses `reasoning`, Messages
   * `thinking`): output the provider bills and the edge may never see (unreported.ts).
   */
  reasoning?: boolean;
  /** The provider-run tools it offers and its bound on their uses (checked by heldToolUses). */
  tools?: OfferedTools;
  /**
   * The stored response it continues (Responses `previous_response_id`): the authority admits
   * it only for the tenant that owns the response (AdmitRequest.previousResponseId).
   */
  previousResponseId?: string;
  /**
   * The stored items its input reads by id (Responses `item_reference`, ...): admitted only for
   * the tenant that owns each (AdmitRequest.itemIds).
   */
  itemIds?: string[];
}

/** An error the provider sent in a stream (Transcript.streamError). */
export interface StreamError {
  status: number;
  message: string;
  beforeStart: boolean;
}

/** The least output a call needs upstream, and why (the 400 says it). */
export interface MinOutput {
  tokens: number;
  why: string;
  param: string;
}

/** What admission granted, for the adapter to write into the upstream request. */
export interface Grant {
  model: CompiledModel;
  upstream: UpstreamConfig;
  /** Output tokens the call may use in all (after the clamp and shrink-to-fit). */
  maxOutput: number;
  choices: number;
  promptTokens: number;
}

export interface CountContext {
  deps: CallDeps;
  model: CompiledModel | undefined;
  /** The tokenizer the edge counts with (`upstream` resolved to the upstream's endpoint). */
  tokenizer: TokenizerName;
  /** The model's first upstream, for `tokenizer: upstream` (undefined with any other). */
  target: UpstreamConfig | undefined;
  /** The model's first upstream, whatever its tokenizer (its counting endpoints). */
  upstream: UpstreamConfig | undefined;
  /** The client headers the surface forwards upstream (its counting endpoint gets them too). */
  headers: Readonly<Record<string, string>>;
  /** The service tier the call is held at (heldServiceTier; `default` for a count alone). */
  serviceTier: string;
  /** Whose count it is: the tenant's queue in the token counter, and the call's abort. */
  owner: CountOwner;
  /** Whose count the upstream's counting endpoints make, and the call's check before any. */
  countFor: CountFor;
}

/** Prompt tokens to admit, or why the call cannot be counted (a 400 before any admission). */
export type Counted = Result<number, EdgeError>;

/** An Anthropic prompt-cache lifetime (`cache_control.ttl`). */
export type CacheLifetime = '5m' | '1h';

/** The input side of a usage, as a provider may report it before the call ends. */
export type InputUsage = Pick<
  Usage,
  'promptTokens' | 'cachedPromptTokens' | 'cacheWrite5mTokens' | 'cacheWrite1hTokens'
>;

/** One upstream event as the pipeline sees it. */
export interface Accepted {
  /** Output text it carries, by choice (content, reasoning, tool calls): what is counted. */
  texts: { choice: number; text: string }[];
  /** The SSE text to write to a streaming client; null: nothing (usage the client did not ask for). */
  forward: string | null;
  /**
   * The reply began though the event carries no text: a provider-run tool's call item (a
   * Responses `web_search_call`, ...), work the provider bills. From it on nothing is held
   * back from a streaming client, and an error in the stream is not retried.
   */
  begins?: boolean;
}

/** One call's reading of the upstream stream, in the surface's own format. */
export interface Transcript {
  /** undefined: not an event of this surface (skipped, logged). */
  accept(event: SseEvent): Accepted | undefined;
  /** The usage the provider reported, once it did (validated counts). */
  usage(): Usage | undefined;
  /**
   * The input side the provider reported before its final usage (Anthropic's message_start),
   * billed with the edge's own output count when the call ends without a final usage.
   */
  inputUsage?(): InputUsage | undefined;
  /** The service tier the provider reported serving the call at, when it named one. */
  serviceTier?(): string | undefined;
  /**
   * The uses of provider-run tools billed per use: the provider's report when it made one,
   * else the uses the stream showed (an output item or a block per use).
   */
  toolUses?(): ToolUses | undefined;
  /**
   * The id under which the upstream stored the response (Responses: its `resp_...`, unless the
   * request said `store: false`): recorded as the tenant's with the call's settle.
   */
  storedResponseId?(): string | undefined;
  /**
   * The ids of the output items the upstream stored with that response (at most MAX_ITEM_IDS):
   * recorded as the tenant's with the call's settle.
   */
  storedItemIds?(): string[];
  /** The provider said the response is complete (its terminal event). */
  finished(): boolean;
  /**
   * Chat: no content came after the provider's last usage report (so a stream that ends after
   * it ended where providers end one). Absent: a surface whose usage comes with its terminal
   * event.
   */
  usageLast?(): boolean;
  /**
   * The error the provider sent in the stream instead of the rest of the answer (Messages'
   * `error` event, chat's `data: {"error": ...}`), as the HTTP status its type stands for (chat's
   * carries none: 502); `beforeStart` when it came before the provider began the reply
   * (message_start): it read and made nothing, as with that status. A call with one fails unless
   * the provider had already finished and reported its usage, however the stream then ends.
   */
  streamError?(): StreamError | undefined;
  /** SSE text ending a stream the edge cut, the way the provider ends one at its limit. */
  endAtLength(usage: Usage): string;
  /** SSE text of an error event in the surface's shape. */
  errorEvent(err: EdgeError, requestId: string): string;
  /** SSE text after the last event of a stream that finished (chat: `[DONE]`). */
  doneEvent(): string;
  /** Non-streaming clients: the response object the provider would have returned. */
  assemble(cut: boolean, usage: Usage): unknown;
}

/** A surface: how its requests are read, counted, forwarded and answered. */
export interface SurfaceAdapter<B> {
  /** The surface, as events and ClickHouse rows record it. */
  readonly name: ApiSurface;
  /** The upstream APIs whose models this surface serves (others are refused before counting). */
  readonly apis: readonly UpstreamApi[];
  /** Upstream path, appended to the upstream's base URL (an `anthropic` upstream's root). */
  readonly path: string;
  /** Client headers passed on to the upstream as sent (lowercase names). */
  readonly forwardHeaders?: readonly ForwardedHeader[];
  /** The edge grows the hold as output arrives (adaptive mode then needs no debt). */
  readonly extensible: boolean;
  /** The upstream is asked for a stream (embeddings: a JSON answer). */
  readonly streamUpstream: boolean;
  asked(body: B): Asked;
  /**
   * The longest prompt-cache lifetime the request marks (Anthropic `cache_control`): a call
   * billed without the provider's usage has its prompt billed as that cache write.
   */
  cacheWrites?(body: B): CacheLifetime | undefined;
  /** The least max output the upstream takes for this body, if the surface has one. */
  minOutput?(body: B): MinOutput | undefined;
  /** Prompt tokens to admit: exact, or an upper bound no real tokenizer exceeds. */
  countPrompt(body: B, ctx: CountContext): Promise<Counted>;
  /** The body to send upstream for what was granted (length/count fields set or removed). */
  upstreamBody(body: B, grant: Grant): { body: Record<string, unknown>; dropped: string[] };
  transcript(body: B, grant: Grant): Transcript;
  /** Turns a plain JSON upstream answer into the events a stream of it would have been. */
  asEvents(json: unknown): SseEvent[];
  /** Answers an error in the surface's error shape. */
  sendError(request: FastifyRequest, reply: FastifyReply, err: EdgeError): FastifyReply;
}
