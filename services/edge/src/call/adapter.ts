import type { CompiledModel, UpstreamConfig } from '@holdfast/config';
import type { Usage } from '@holdfast/events';
import type { TokenizerName } from '@holdfast/tokenizer';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { EdgeError } from '../errors.js';
import type { SseEvent } from '../upstream/sse.js';
import type { CallDeps } from './deps.js';

/** The API surfaces the edge serves; each is one adapter over the same call pipeline. */
type SurfaceName = 'chat' | 'responses' | 'messages' | 'embeddings';

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
  /** The model's first upstream, for `tokenizer: upstream`. */
  target: UpstreamConfig | undefined;
}

/** One upstream event as the pipeline sees it. */
export interface Accepted {
  /** Output text it carries, by choice (content, reasoning, tool calls): what is counted. */
  texts: { choice: number; text: string }[];
  /** The SSE text to write to a streaming client; null: nothing (usage the client did not ask for). */
  forward: string | null;
}

/** One call's reading of the upstream stream, in the surface's own format. */
export interface Transcript {
  /** undefined: not an event of this surface (skipped, logged). */
  accept(event: SseEvent): Accepted | undefined;
  /** The usage the provider reported, once it did (validated counts). */
  usage(): Usage | undefined;
  /** The provider said the response is complete (its terminal event). */
  finished(): boolean;
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
  readonly name: SurfaceName;
  /** Upstream path, appended to the upstream's base URL. */
  readonly path: string;
  /** The edge grows the hold as output arrives (adaptive mode then needs no debt). */
  readonly extensible: boolean;
  /** The upstream is asked for a stream (embeddings: a JSON answer). */
  readonly streamUpstream: boolean;
  asked(body: B): Asked;
  /** Prompt tokens to admit: exact, or an upper bound no real tokenizer exceeds. */
  countPrompt(body: B, ctx: CountContext): Promise<number>;
  /** The body to send upstream for what was granted (length/count fields set or removed). */
  upstreamBody(body: B, grant: Grant): { body: Record<string, unknown>; dropped: string[] };
  transcript(body: B, grant: Grant): Transcript;
  /** Turns a plain JSON upstream answer into the events a stream of it would have been. */
  asEvents(json: unknown): SseEvent[];
  /** Answers an error in the surface's error shape. */
  sendError(request: FastifyRequest, reply: FastifyReply, err: EdgeError): FastifyReply;
}
