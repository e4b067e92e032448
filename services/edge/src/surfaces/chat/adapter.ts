import type { FastifyReply, FastifyRequest } from 'fastify';
import { ItemId, MAX_ITEM_IDS } from '@holdfast/events';
import { Err, Ok } from '@holdfast/runtime';
import type { CountContext, Counted, Grant, SurfaceAdapter } from '../../call/adapter.js';
import { forwardedBody } from '../../call/forward.js';
import { countUnseen, type UnseenInput } from '../../call/unseen.js';
import { EdgeError, itemNotFound } from '../../errors.js';
import { sendError } from '../../plugins/errors.js';
import { fileIdKind } from '../file-ids.js';
import { bodyEndUser } from '../../request/end-user.js';
import type { SseEvent } from '../../upstream/sse.js';
import type { ChatRequest } from './schema.js';
import { ChatTranscript, type ChatChunk } from './transcript.js';

/** The Chat Completions fields the edge forwards as sent (length and count fields it sets). */
const CHAT_FIELDS: ReadonlySet<string> = new Set([
  'model',
  'messages',
  'temperature',
  'top_p',
  'presence_penalty',
  'frequency_penalty',
  'logit_bias',
  'logprobs',
  'top_logprobs',
  'stop',
  'seed',
  'user',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'functions',
  'function_call',
  'response_format',
  'metadata',
  'store',
  'service_tier',
  'reasoning_effort',
  'modalities',
  'audio',
  'verbosity',
  'safety_identifier',
  'prompt_cache_key',
  'prompt_cache_retention',
]);

/**
 * A search model's fields: `web_search_options` too (its `search_context_size`, `user_location`).
 * Elsewhere it is dropped: a model that does not search bills no search, and one whose config
 * does not say it searches has no fee held for it (docs/budgets.md).
 */
const SEARCH_CHAT_FIELDS: ReadonlySet<string> = new Set([...CHAT_FIELDS, 'web_search_options']);

/**
 * The input a call is held: its prompt, and on a search model what its search reads. OpenAI
 * bills a search model's search content (the results the model reads) as input at the model's
 * rate on its newer search models (`gpt-5-search-api`; its non-reasoning preview models' is
 * free), which no count of the request sees: a model marked `searchModel` with
 * `upstreamStateAllowanceTokens` is held that allowance once a call (one search), as a
 * Responses web search is held it per use (docs/budgets.md, "How unseen tool input is held").
 */
async function countPrompt(body: ChatRequest, ctx: CountContext): Promise<Counted> {
  const unowned = unownedAudio(body);
  if (unowned) return Err(unowned);
  const counted = await countRequest(body, ctx);
  const search = ctx.model?.searchModel ? (ctx.model.upstreamStateAllowanceTokens ?? 0) : 0;
  return counted.ok && search > 0 ? Ok(counted.value + search) : counted;
}

/**
 * The prompt in the model's tokens: its own tokenizer when the edge has it; for `tokenizer:
 * upstream` (llama-server), the server's own template and tokenizer over everything it renders
 * (tools, response_format: the forwarded body itself); else, or when the upstream cannot say,
 * the proven upper bound. Images are priced for the model the upstream runs.
 */
async function countRequest(body: ChatRequest, ctx: CountContext): Promise<Counted> {
  const upstreamModel = ctx.model?.upstreamModel ?? ctx.model?.id ?? body.model;
  if (ctx.target) {
    const rendered = forwardedBody(body, {
      known: CHAT_FIELDS,
      passThrough: ctx.target.passThrough,
      set: {},
    }).body;
    const counted = await ctx.deps.upstream.count.chatPrompt(ctx.target, ctx.countFor, rendered);
    if (counted !== undefined) return Ok(counted);
  }
  const local = () =>
    ctx.deps.counter.countChat({ ...body, model: upstreamModel }, ctx.tokenizer, ctx.owner);
  const [first, ...more] = unseenInputs(body);
  if (first) {
    const why = first.billed
      ? 'Chat Completions has no counting endpoint'
      : 'Chat Completions has no counting endpoint: send it on POST /v1/responses, where the upstream counts it';
    return countUnseen([first, ...more], local, ctx.model, why);
  }
  return Ok(await local());
}

/**
 * Input only the upstream can size: `file` content parts (a PDF by id or inline), and earlier
 * audio replies an assistant message brings back by id (`audio: {id}`), billed as audio input.
 */
function unseenInputs(body: ChatRequest): UnseenInput[] {
  return body.messages.flatMap((message, i): UnseenInput[] => [
    ...(audioReference(message)
      ? [
          {
            param: `messages.${i}.audio`,
            what: 'an earlier audio reply',
            billed: 'the provider bills the audio it refers to as audio input',
          },
        ]
      : []),
    ...(Array.isArray(message.content)
      ? (message.content as { type: string }[]).flatMap((part, j) =>
          part.type === 'file'
            ? [{ param: `messages.${i}.content.${j}`, what: 'a file part' }]
            : [],
        )
      : []),
  ]);
}

/**
 * The earlier audio replies the call brings back by id (an assistant message's `audio.id`), each
 * once: the provider keeps an audio reply for every team of the upstream account, so a call
 * naming one is admitted only for the team whose call made it (Asked.itemIds; its settle
 * recorded it: ChatTranscript.storedItemIds).
 */
function audioIds(body: ChatRequest): string[] {
  const ids = new Set<string>();
  for (const message of body.messages) {
    if (message.role !== 'assistant') continue;
    const id = (message as { audio?: { id?: unknown } | null }).audio?.id;
    if (typeof id === 'string') ids.add(id);
  }
  return [...ids];
}

/**
 * The files the call's `file` parts name by id (`file: {file_id}`), each once, by their kind
 * (file-ids.ts): a file another team's code wrote (a Responses code interpreter's `cfile_`) is
 * refused by the authority; the operator's uploads (`file-...`) are every team's.
 */
function namedFiles(body: ChatRequest): string[] {
  const ids = new Set<string>();
  for (const message of body.messages) {
    if (!Array.isArray(message.content)) continue;
    for (const part of message.content as { type: string; file?: { file_id?: unknown } }[]) {
      const id = part.type === 'file' ? part.file?.file_id : undefined;
      if (typeof id === 'string') ids.add(id);
    }
  }
  return [...ids];
}

/** The audio replies and owned files the call names by id (Asked.itemIds). */
function namedStored(body: ChatRequest): string[] {
  return [...audioIds(body), ...namedFiles(body).filter((id) => fileIdKind(id) === 'owned')];
}

/**
 * An audio id no call could have made (not an ItemId: whitespace, another alphabet), a disguised
 * file id, or more of them than an admit checks: refused before anything is counted, as an
 * unknown one is.
 */
function unownedAudio(body: ChatRequest): EdgeError | undefined {
  const unowned = audioIds(body).find((id) => !ItemId.safeParse(id).success);
  if (unowned !== undefined) return itemNotFound(unowned, 'audio');
  const disguised = namedFiles(body).find((id) => fileIdKind(id) === 'disguised');
  if (disguised !== undefined) return itemNotFound(disguised, 'chat-file');
  if (namedStored(body).length <= MAX_ITEM_IDS) return undefined;
  const message = `messages name more than ${MAX_ITEM_IDS} audio replies and files by id. Send fewer in one call.`;
  return new EdgeError({ code: 'invalid_request', message, param: 'messages' });
}

/** An assistant message that refers to an earlier audio reply (its `audio.id`). */
function audioReference(message: ChatRequest['messages'][number]): boolean {
  return message.role === 'assistant' && (message as { audio?: unknown }).audio != null;
}

/**
 * The call sends audio (`input_audio` parts, or an earlier audio reply by id). Their tokens are counted as their base64 text,
 * which a clip of silence at the smallest encoding (8 kbit/s MP3) brings to about 17 text
 * tokens per audio token, barely above the 16x of audio over text input prices: so the prompt
 * is held at the audio input price (docs/budgets.md, "How audio is priced").
 */
function sendsAudio(body: ChatRequest): boolean {
  return body.messages.some(
    (m) =>
      audioReference(m) ||
      (Array.isArray(m.content) &&
        (m.content as { type: string }[]).some((part) => part.type === 'input_audio')),
  );
}

/**
 * The call asks for audio output: `modalities` names it, or the `audio` output parameters are
 * set (OpenAI refuses those without the modality; held as audio either way, never under).
 */
function asksAudio(body: ChatRequest): boolean {
  return body.modalities?.includes('audio') === true || (body as { audio?: unknown }).audio != null;
}

/** What goes upstream: the known fields, always streamed, with the granted output per choice. */
function upstreamBody(body: ChatRequest, grant: Grant) {
  const perChoice = Math.max(1, Math.floor(grant.maxOutput / grant.choices));
  // o-series models take only max_completion_tokens; the client's choice of field is kept.
  const field = body.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens';
  return forwardedBody(body, {
    known: grant.model.searchModel ? SEARCH_CHAT_FIELDS : CHAT_FIELDS,
    passThrough: grant.upstream.passThrough,
    set: {
      model: grant.model.upstreamModel ?? grant.model.id,
      [field]: perChoice,
      n: grant.choices > 1 ? grant.choices : undefined,
      stream: true,
      stream_options: { ...body.stream_options, include_usage: true },
    },
  });
}

/** A whole `chat.completion` as the single chunk a stream of it would add up to. */
function asEvents(json: unknown): SseEvent[] {
  const c = (json ?? {}) as Omit<ChatChunk, 'choices'> & {
    choices?: { index?: number; message?: Record<string, unknown>; finish_reason?: string }[];
  };
  const chunk: ChatChunk = {
    ...c,
    object: 'chat.completion.chunk',
    choices: (c.choices ?? []).map((choice) => {
      const message = choice.message ?? {};
      const toolCalls = Array.isArray(message.tool_calls)
        ? (message.tool_calls as object[]).map((t, index) => ({ ...t, index }))
        : undefined;
      return {
        index: choice.index,
        delta: { ...message, ...(toolCalls ? { tool_calls: toolCalls } : {}) },
        finish_reason: choice.finish_reason ?? null,
      };
    }),
  };
  return [{ event: undefined, data: JSON.stringify(chunk) }];
}

/** `POST /v1/chat/completions`. */
export const chatAdapter: SurfaceAdapter<ChatRequest> = {
  name: 'chat',
  apis: ['openai'],
  path: '/chat/completions',
  extensible: true,
  streamUpstream: true,
  asked: (body) => ({
    model: body.model,
    maxOutput: body.max_completion_tokens ?? body.max_tokens ?? null,
    choices: body.n ?? 1,
    stream: body.stream === true,
    // OpenAI's successor of `user` names the end user too (as on Responses); `user` wins.
    endUser: bodyEndUser(body.user, body.safety_identifier),
    audioInput: sendsAudio(body),
    audioOutput: asksAudio(body),
    serviceTier: body.service_tier,
    reasoning: body.reasoning_effort != null && body.reasoning_effort !== 'none',
    // A search model searches on every call (heldToolUses: one web search held, one choice).
    tools: { per: 'model', choices: body.n ?? 1 },
    ...(namedStored(body).length > 0 ? { itemIds: namedStored(body).slice(0, MAX_ITEM_IDS) } : {}),
  }),
  countPrompt,
  upstreamBody,
  transcript: (body, grant) =>
    new ChatTranscript({
      assemble: body.stream !== true,
      wantsUsage: body.stream_options?.include_usage === true,
      model: body.model,
      searchModel: grant.model.searchModel,
    }),
  asEvents,
  sendError: (request: FastifyRequest, reply: FastifyReply, err: EdgeError) =>
    sendError(request, reply, err),
};
